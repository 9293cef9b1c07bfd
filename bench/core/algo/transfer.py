"""How the noise a probe measured at one S carries to another S: the one transfer `advise`'s prediction and finding
(iii)'s evidence from advise's probes make (bench.core.algo.predict counts the iterations; this says which profile it
counts them on).

**What moves.** A run at S follows a noise scale that the probe at S_p did not see, B × c: the clamp on μ̂²
raises its mean the more the smaller S (Var μ̂² ∝ 1/S: bench.core.algo.predict.engine_moments), and a larger lr
takes another path through the weights, whose noise differs at the same τ. Measured on six models with every
completed AdaScale run used as a probe of the mean of every other S of its folder (docs/design.md §4), log c
is close to a difference f(S) − f(S_p) of one function per model, and f differs between models: on the
convolutional and recurrent nets it rises ≈ 0.15–0.2 per octave over the whole range, on logistic regression it
rises steeply below S ≈ 16 (the clamp, ∝ 1/S) and is flat or falls above. One probe cannot know f.

**Two probes.** A probe at S_hi (the largest S asked) and one at S_lo (S_hi/16): the multiplier at which the
high probe's profile meets the low probe's count, log c_lo = f(S_lo) − f(S_hi), gives f's mean slope between
them per octave, `slope`. A probe's profile carried to S is its σ² × e^{slope · log2(S/S_probe)}. At each probe's
S its own profile (its own count within a few %: bench.core.algo.predict.FOLDED_PARTS); between them both probes'
carried profiles, their counts' geometric mean weighted by the distance in log S (each probe sees part of f's bend: on
logistic regression the low probe's count holds the clamp's rise, the high probe's the flat top); below S_lo the
slope carried on from the low probe (where the count depends little on c: S·b ≪ B gives ≈ T1/S whatever c), past
S_hi from the high one. What is left — f's bend between the probes, the probes' own seeds — is the
model error reports.advice calibrates on measured runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .predict import iterations_following

Profile = Sequence[tuple[float, float]]

REACH = math.log(64.0)  # |log c| solved for within ±REACH; a count past it counts as REACH (conservative)
LOW_RATIO = 16  # S_lo = S_hi / LOW_RATIO: four octaves, so that the slope is read over a span its noise does not swamp


def scaled(profile: Profile, c: float) -> tuple[tuple[float, float], ...]:
    """The profile with σ² × c: a noise scale c times the probe's."""
    return tuple((c * v, q) for v, q in profile)


def multiplier(profile: Profile, scale: int, T1: float, measured: float) -> float:
    """log c at which the prediction from `profile` with σ² × c meets `measured` iterations at S (the count falls
    as c rises); ±REACH where no c within reaches it; NaN where `measured` is no positive count or no
    prediction is finite."""
    return solved(lambda c: iterations_following(scaled(profile, c), scale, T1), measured)


def solved(count_at: Callable[[float], float], measured: float) -> float:
    """log c at which `count_at(c)` (a prediction with σ² × c: falling as c rises) meets `measured`; ±REACH where no
    c within reaches it; NaN where `measured` is no positive count or no prediction is finite."""
    from scipy.optimize import brentq

    if not (measured > 0 and math.isfinite(measured)):
        return math.nan

    gap = lambda x: math.log(count_at(math.exp(x)) / measured)  # noqa: E731
    lo, hi = gap(-REACH), gap(REACH)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan
    if lo <= 0:
        return -REACH
    return REACH if hi >= 0 else float(brentq(gap, -REACH, REACH, xtol=1e-4))


def pooled(profiles: Sequence[Profile]) -> tuple[tuple[float, float], ...]:
    """The window-wise mean of several seeds' profiles at one S (all of one length): a central path of the noise
    (advise's rule advice reads its gain there). Not what the count is predicted from: the count is not linear in
    the moments, and a pooled profile's count can lie past every seed's own (each seed is predicted apart and the
    counts averaged: reports.advice.Probes)."""
    k = len(profiles)
    return tuple(
        (sum(p[j][0] for p in profiles) / k, sum(p[j][1] for p in profiles) / k) for j in range(len(profiles[0]))
    )


def low_scale(high: int) -> int | None:
    """The low probe's S for a high probe at `high`: high / LOW_RATIO, at least 2; None where that is not below
    `high` (no second S to read a slope from)."""
    low = max(2, high // LOW_RATIO)
    return low if low < high else None


def slope(high: Profile, high_scale: int, low_scale: int, low_count: float, T1: float) -> float:
    """log c per octave between the probes: the multiplier at which the high probe's profile meets the low
    probe's count, over log2(S_lo/S_hi); 0 where it cannot be read (no count, or the same S)."""
    octaves = math.log2(low_scale / high_scale) if low_scale > 0 and high_scale > 0 else 0.0
    if octaves == 0:
        return 0.0
    c = multiplier(high, low_scale, T1, low_count)
    return c / octaves if math.isfinite(c) else 0.0


def nearest(scales: Sequence[int], scale: int) -> int:
    """The index of the probe nearest `scale` in log S (a tie: the larger S, whose noise the gain reads more)."""
    return min(range(len(scales)), key=lambda i: (abs(math.log2(scale / scales[i])), -scales[i]))


def log_c(from_scale: int, scale: int, per_octave: float) -> float:
    """The transfer's log c from a probe at `from_scale` to `scale`."""
    return per_octave * math.log2(scale / from_scale)


def transferred(probes: Sequence[tuple[int, Profile]], per_octave: float, scale: int) -> tuple[int, Profile]:
    """(S of the nearer probe, its profile with σ² × e^{log c}) that a run at `scale` is predicted to follow."""
    i = nearest([s for s, _ in probes], scale)
    s, profile = probes[i]
    return s, scaled(profile, math.exp(log_c(s, scale, per_octave)))


def iterations_from(
    probes: Sequence[tuple[int, Profile]], per_octave: float, scale: int, T1: float, c: float = 1.0
) -> float:
    """The iterations of an AdaScale run at `scale` predicted from the probes' (S, folded profile) and the slope
    between them (module docstring), σ² × `c` more (the model error's ends): past the probes, the nearer one's
    transferred profile; between them, both transferred and their counts' geometric mean weighted by the distance in
    log S (each probe's own count at its own S); one probe: its profile as it is (per_octave 0)."""

    def count(i: int) -> float:
        s, profile = probes[i]
        return iterations_following(scaled(profile, c * math.exp(log_c(s, scale, per_octave))), scale, T1)

    scales = [s for s, _ in probes]
    if len(probes) < 2 or not min(scales) < scale < max(scales):
        return count(nearest(scales, scale))
    hi, lo = scales.index(max(scales)), scales.index(min(scales))
    w = math.log(scale / scales[lo]) / math.log(scales[hi] / scales[lo])
    return math.exp((1 - w) * math.log(count(lo)) + w * math.log(count(hi)))


@dataclass(frozen=True)
class Pair:
    """One seed's probes, the one home of a prediction from them (advise's, reports.advice.Probes, and finding (iii)'s
    from advise's pilot runs, reports.stats.noise): the high probe's folded profile at S_hi, the low probe's at
    S_lo with its count (None: one probe), the slope between them (`slope`, read once) and T1."""

    high: Profile
    high_scale: int
    T1: float
    low: Profile | None = None
    low_scale: int = 0
    low_count: float = math.nan
    per_octave: float = field(default=math.nan)  # NaN: read from the probes (`slope`; 0 with one probe)

    def __post_init__(self) -> None:
        if math.isnan(self.per_octave):
            k = 0.0 if self.low is None else slope(self.high, self.high_scale, self.low_scale, self.low_count, self.T1)
            object.__setattr__(self, "per_octave", k)

    @property
    def anchors(self) -> list[tuple[int, Profile]]:
        """(S, profile) of each probe, the high one first."""
        return [(self.high_scale, self.high)] + ([(self.low_scale, self.low)] if self.low is not None else [])

    def iterations(self, scale: int, c: float = 1.0) -> float:
        """The prediction at `scale`, σ² × `c` (`iterations_from`)."""
        return iterations_from(self.anchors, self.per_octave, scale, self.T1, c)

    def profile_at(self, scale: int) -> Profile:
        """The profile a run at `scale` is predicted to follow (`transferred`)."""
        return transferred(self.anchors, self.per_octave, scale)[1]

    def with_high(self, high: Profile) -> Pair:
        """Another high profile (a jackknife's leave-out): the slope read again from it."""
        return dataclasses.replace(self, high=high, per_octave=math.nan)

    def with_low(self, low: Profile) -> Pair:
        """Another low profile: the slope kept (it reads the low probe's count, not its profile)."""
        return dataclasses.replace(self, low=low)

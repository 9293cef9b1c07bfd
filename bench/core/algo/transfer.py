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

**Probes along S.** A probe at S_hi (the largest S asked), one at S_lo (S_hi/16) and one between them (S_hi/4,
`probe_scales`): the multiplier at which a probe's profile meets its lower neighbour's count, log c = f(S_lo) −
f(S_hi) over that segment, gives f's mean slope on it per octave, `slope`. A probe's profile carried to S is its
σ² × e^{slope · log2(S/S_probe)}. At each probe's S its own profile (its own count within a few %:
bench.core.algo.predict.FOLDED_PARTS); on a segment both its probes' carried profiles, their counts' geometric mean
weighted by the distance in log S (each probe sees part of f's bend: on logistic regression the low probe's count
holds the clamp's rise, the high probe's the flat top); below S_lo the lowest segment's slope carried on from the
low probe (where the count depends little on c: S·b ≪ B gives ≈ T1/S whatever c), past S_hi the highest from the
high one. Two probes read one slope, a line in log S; f bends (on the user's CNN its slope falls from ≈ 0.27 to
≈ 0.13 per octave), and at two octaves from either probe the line missed the curve by ≈ 6 % of the count
(docs/design.md §4): the middle probe makes it a broken line that bends where f does. What is left — f's bend
within a segment, the probes' own seeds — is the model error reports.advice calibrates on measured runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .predict import iterations_following

Profile = Sequence[tuple[float, float]]

REACH = math.log(64.0)  # |log c| solved for within ±REACH; a count past it counts as REACH (conservative)
LOW_RATIO = 16  # S_lo = S_hi / LOW_RATIO: four octaves, so that the slope is read over a span its noise does not swamp
MIDDLE_SPAN = 3  # octaves between the high and low probes from which a middle one reads f's bend between them


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


def probe_scales(high: int) -> tuple[int, ...]:
    """advise's probes for a high one at `high`, high to low: the low one at high / LOW_RATIO (at least 2), and between
    them, where they are MIDDLE_SPAN octaves apart or more, the middle one at the power of two nearest their geometric
    mean; `(high,)` where no S below it is left."""
    low = max(2, high // LOW_RATIO)
    if low >= high:
        return (high,)
    return (high, *middle_scales(high, low), low)


def middle_scales(high: int, low: int) -> tuple[int, ...]:
    """The middle probe's S between `high` and `low` (`probe_scales`), or () where they are too near for one."""
    if math.log2(high / low) < MIDDLE_SPAN:
        return ()
    mid = 2 ** round((math.log2(high) + math.log2(low)) / 2)
    return (mid,) if low < mid < high else ()


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


@dataclass(frozen=True)
class Anchor:
    """One probe as the transfer reads it: its S, its folded profile and its count (NaN: not read)."""

    scale: int
    profile: Profile
    count: float = math.nan


@dataclass(frozen=True)
class Chain:
    """One seed's probes, the one home of a prediction from them (advise's, reports.advice.Probes, and finding (iii)'s
    from advise's pilot runs, reports.stats.noise): their anchors high to low, the slope of each segment between
    neighbours (`slope`: the higher probe's profile meeting the lower one's count, read once) and T1.

    At S: on a segment (between two neighbouring probes) both carried by its slope, their counts' geometric mean
    weighted by the distance in log S; at a probe's S its own profile; past the ends the end probe carried by the end
    segment's slope. Two anchors are advise's former pair; a middle one makes f a broken line in log S, which
    follows its bend where one slope cannot (docs/design.md §4: the user's CNN at S = 32)."""

    anchors: tuple[Anchor, ...]
    T1: float
    slopes: tuple[float, ...] = ()  # per segment; (): read from the anchors

    def __post_init__(self) -> None:
        scales = [a.scale for a in self.anchors]
        if not scales or scales != sorted(set(scales), reverse=True):
            raise ValueError(f"a chain's probes at distinct S, high to low: {scales}")
        if not self.slopes:
            read = tuple(self._read(j) for j in range(len(self.anchors) - 1))
            object.__setattr__(self, "slopes", read)
        elif len(self.slopes) != len(self.anchors) - 1:
            raise ValueError(
                f"a chain of {len(self.anchors)} probes has {len(self.anchors) - 1} slopes, not {len(self.slopes)}"
            )

    def _read(self, j: int) -> float:
        hi, lo = self.anchors[j], self.anchors[j + 1]
        return slope(hi.profile, hi.scale, lo.scale, lo.count, self.T1)

    @property
    def scales(self) -> list[int]:
        return [a.scale for a in self.anchors]

    @property
    def per_octave(self) -> float:
        """f's mean slope from the high probe to the low one (what advice.md prints; 0 with one probe)."""
        spans = [math.log2(a.scale / b.scale) for a, b in zip(self.anchors, self.anchors[1:], strict=False)]
        return sum(k * d for k, d in zip(self.slopes, spans, strict=True)) / sum(spans) if spans else 0.0

    def segment(self, scale: int) -> int:
        """The segment whose slope carries a probe to `scale`: the one holding it, or the end one past the probes."""
        inside = [j for j in range(len(self.slopes)) if self.anchors[j + 1].scale <= scale]
        return inside[0] if inside else len(self.slopes) - 1

    def _count(self, i: int, scale: int, c: float) -> float:
        a = self.anchors[i]
        k = self.slopes[self.segment(scale)] if self.slopes else 0.0
        return iterations_following(scaled(a.profile, c * math.exp(log_c(a.scale, scale, k))), scale, self.T1)

    def iterations(self, scale: int, c: float = 1.0) -> float:
        """The prediction at `scale`, σ² × `c` more (the model error's ends): see the class docstring."""
        scales = self.scales
        if scale in scales or not min(scales) < scale < max(scales):
            return self._count(nearest(scales, scale), scale, c)
        j = self.segment(scale)
        hi, lo = scales[j], scales[j + 1]
        w = math.log(scale / lo) / math.log(hi / lo)
        below, above = self._count(j + 1, scale, c), self._count(j, scale, c)
        if not (below > 0 and above > 0):  # NaN (no finite prediction) or no count: no geometric mean
            return math.nan
        return math.exp((1 - w) * math.log(below) + w * math.log(above))

    def profile_at(self, scale: int) -> Profile:
        """The profile a run at `scale` is predicted to follow: the nearer probe's, carried by the segment's slope."""
        a = self.anchors[nearest(self.scales, scale)]
        k = self.slopes[self.segment(scale)] if self.slopes else 0.0
        return scaled(a.profile, math.exp(log_c(a.scale, scale, k)))

    def with_profile(self, i: int, profile: Profile) -> Chain:
        """Anchor i with another profile (a jackknife's leave-out): the slope it reads (the segment below it) read
        again, the one above kept (that reads its count, not its profile)."""
        anchors = list(self.anchors)
        anchors[i] = dataclasses.replace(anchors[i], profile=profile)
        slopes = list(self.slopes)
        chain = Chain(tuple(anchors), self.T1, tuple(slopes) or ())
        if i < len(slopes):
            slopes[i] = chain._read(i)
            chain = dataclasses.replace(chain, slopes=tuple(slopes))
        return chain

"""AdaScale gain estimators (docs/design.md §1).

Both take the two per-iteration statistics of the S micro-batch gradients g_i,
`sum_sq = Σ_i ||g_i||²` and `mean_sq = ||ḡ||²`, and return the gain r_t ∈ [1, S].

The moving averages use θ = max(1 − S/1000, 0) and Adam-style bias correction. When S changes
(elastic runs) θ changes with it, so the correction divides by 1 − Π_k θ_k, which is 1 − θⁿ for a
constant θ and stays exact across a change of S. The averages estimate per-batch quantities, so they
stay valid when S changes; only S in the gain formula changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

VAR_FLOOR = 1e-6
RATIO_EPS = 1e-6


def theta(scale: int) -> float:
    return max(1.0 - scale / 1000.0, 0.0)


def moments(sum_sq: float, mean_sq: float, n: int) -> tuple[float, float]:
    """Unbiased estimates (σ², μ²) of one batch gradient's variance and squared mean from n ≥ 2 batch
    gradients: var = (sum_sq − n·mean_sq)/(n − 1), sqr = mean_sq − var/n (unclamped)."""
    var = (sum_sq - n * mean_sq) / (n - 1)
    sqr = mean_sq - var / n  # with the unclamped var
    return var, sqr


def clamp(var: float, sqr: float) -> tuple[float, float]:
    """var ≥ VAR_FLOOR and sqr ≥ 0, as the gain needs them."""
    return max(var, VAR_FLOOR), max(sqr, 0.0)


def gain_from(var: float, sqr: float, scale: int) -> float:
    """The gain r = (σ² + μ²)/(σ²/S + μ²) of scale S; NaN where σ²/S + μ² = 0, which clamped moments never
    reach (σ² ≥ VAR_FLOOR) but unclamped replays of degenerate statistics can (reports.stats.lagmatch)."""
    den = var / scale + sqr
    return (var + sqr) / den if den else math.nan


def b_simple(var: float, sqr: float, batch_size: float) -> float:
    """The simple gradient-noise scale B_simple = b·σ²/μ² (McCandlish et al. 2018), in examples, of the
    variance σ² of one batch-b gradient and the squared mean μ²: inf when μ² ≤ 0 (the noise swamps the
    signal: no finite scale can be told); 0 when σ² ≤ 0 (an unbiased estimate can dip below 0)."""
    return batch_size * max(var, 0.0) / sqr if sqr > 0 else math.inf


def steady_gain(noise_scale: float, batch_size: float, scale: float) -> float:
    """The gain of scale S at a constant noise scale B: σ²/μ² = B/b in `gain_from`, so
    r = S·(B/b + 1)/(B/b + S) — ≈ S where S·b ≪ B, ≈ 1 where b ≫ B; S for B = inf."""
    if math.isinf(noise_scale):
        return float(scale)
    return gain_from(noise_scale / batch_size, 1.0, scale)


# ------------------------------------------------------------- the noise scale, drawn without replacement
#
# The engine's S micro-batches of an iteration are not independent draws: they are consecutive, disjoint
# blocks of b items of one epoch's permutation of the N training items (bench.core.engine.data.ItemStream), so
# they are a sample without replacement. Let x_j be item j's gradient, G = (1/N) Σ_j x_j the full-data
# gradient and s² = (1/(N − 1)) Σ_j ||x_j − G||² the trace of the per-example covariance. The textbook facts
# of sampling without replacement (two distinct draws covary by −s²/N) give, for micro-batch means g_i:
#     E||g_i − G||² = (s²/b)(1 − b/N)          Cov(g_i, g_k) = −s²/N   (i ≠ k, the same permutation)
# and Cov = 0 for two micro-batches of different epochs' permutations (independent shuffles). Let ρ be the
# share of the S(S − 1) ordered pairs (i, k) that come from the same permutation (1 unless the iteration
# straddles an epoch boundary) and C̄ = −ρ·s²/N their mean covariance. With V = E||g_i − G||²:
#     E[Σ_i ||g_i − ḡ||²] = Σ_i E||g_i||² − S·E||ḡ||² = (S − 1)(V − C̄)
#     E[var] = V − C̄ = (s²/b)(1 − (1 − ρ)·b/N)       E[sqr] = E[mean_sq] − E[var]/S = |G|² + C̄ = |G|² − ρ·s²/N
# for var, sqr = `moments(sum_sq, mean_sq, S)`. So with M = N/b micro-batches per epoch,
#     σ² = var / (1 − (1 − ρ)/M)   estimates s²/b without bias,   μ² = sqr + ρ·σ²/M   estimates |G|²,
# and the noise scale B = b·σ²/μ² = s²/|G|² (McCandlish et al. 2018's B_simple, per-example covariance over
# the squared full gradient). At ρ = 1: B = b·var/(sqr + b·var/N). Without the correction, sqr is low by
# s²/N — the whole of |G|² once training nears a minimum (smoke logreg S = 8, iteration 400: 5.8e-5 against
# |G|² = 1.68e-4), so B read as b·var/sqr is several times too large late in training. Independent draws
# (with replacement, or an infinite stream) are M = inf: no correction. Checked by Monte Carlo of the
# engine's own draws against logreg's exact G and s² (tests/algo/test_noise_population.py).


def pair_fraction(first: int, scale: int, per_epoch: float) -> float:
    """ρ of an iteration: the share of its S(S − 1) ordered micro-batch pairs drawn from the same epoch's
    permutation, for micro-batches first … first + S − 1 of the stream and `per_epoch` (M = N/b) of them per
    epoch (1 for an iteration inside one epoch; below 1 where it straddles a boundary)."""
    if scale < 2 or not math.isfinite(per_epoch):
        return 1.0
    count: dict[int, int] = {}
    for j in range(first, first + scale):
        e = int(j // per_epoch)
        count[e] = count.get(e, 0) + 1
    return sum(a * (a - 1) for a in count.values()) / (scale * (scale - 1))


def population_moments(var: float, sqr: float, per_epoch: float, rho: float = 1.0) -> tuple[float, float]:
    """(σ², μ²) of micro-batches drawn without replacement out of M = N/b per epoch, from the `moments`
    var, sqr of one iteration (or their average) and its pair share ρ: σ² = var/(1 − (1 − ρ)/M) estimates the
    batch-b variance s²/b and μ² = sqr + ρ·σ²/M the squared full gradient |G|², both without bias (the
    derivation above). M = inf (independent draws) returns (var, sqr)."""
    if not math.isfinite(per_epoch):
        return var, sqr
    sigma2 = var / (1.0 - (1.0 - rho) / per_epoch)
    return sigma2, sqr + rho * sigma2 / per_epoch


def b_simple_average(records: Iterable[tuple[float, float, int]], batch_size: float) -> float:
    """The training average of B_simple from (sum_sq, mean_sq, S) of the iterations with S ≥ 2:
    b·Σσ²_t/Σμ²_t with σ²_t, μ²_t the unbiased, unclamped `moments` of each iteration — the ratio of the
    sums, not the mean of per-iteration ratios, which blow up wherever one μ²_t is near 0 (McCandlish et
    al. 2018, App. A, average numerator and denominator apart). NaN without such iterations."""
    var_sum = sqr_sum = 0.0
    n = 0
    for sum_sq, mean_sq, scale in records:
        if scale < 2 or not (math.isfinite(sum_sq) and math.isfinite(mean_sq)):
            continue
        var, sqr = moments(sum_sq, mean_sq, int(scale))
        var_sum += var
        sqr_sum += sqr
        n += 1
    if not n:
        return math.nan
    return b_simple(var_sum / n, sqr_sum / n, batch_size)


class _BiasCorrectedEMA:
    """Two exponential moving averages that share θ and its bias correction."""

    def __init__(self, first: float, second: float) -> None:
        self.initial = (first, second)
        self.raw = [0.0, 0.0]
        self.theta_prod = 1.0  # Π θ_k over the updates so far
        self.updates = 0
        self._values = self.initial

    def update(self, x: float, y: float, th: float) -> None:
        self.raw[0] = th * self.raw[0] + (1.0 - th) * x
        self.raw[1] = th * self.raw[1] + (1.0 - th) * y
        self.theta_prod *= th
        self.updates += 1
        self._corrected()

    def _corrected(self) -> None:
        """The bias-corrected pair, computed once per update (the gain and the metrics record both read it)."""
        correction = 1.0 - self.theta_prod
        self._values = (self.raw[0] / correction, self.raw[1] / correction) if self.updates else self.initial

    def values(self) -> tuple[float, float]:
        return self._values

    def state_dict(self) -> dict[str, Any]:
        return {"raw": list(self.raw), "theta_prod": self.theta_prod, "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A saved state, checked as the update could have made it (a checkpoint may come from anyone; the engine
        checks its numbers are finite): two averages, Π θ in [0, 1] and below 1 once anything was folded in (the
        bias correction divides by 1 − Π θ), a count ≥ 0. ValueError otherwise: a checkpoint that does not fit."""
        raw = [float(v) for v in state["raw"]]
        theta_prod, updates = float(state["theta_prod"]), int(state["updates"])
        if len(raw) != 2:
            raise ValueError(f"{len(raw)} moving averages, not 2")
        if not 0.0 <= theta_prod <= 1.0 or updates < 0 or (updates and theta_prod == 1.0):
            raise ValueError(f"theta_prod {theta_prod!r} after {updates} updates")
        self.raw, self.theta_prod, self.updates = raw, theta_prod, updates
        self._corrected()


class UnbiasedGain:
    """The default estimator: unbiased σ² and μ² from the S batch gradients, then the gain
    r = (σ² + μ²) / (σ²/S + μ²) from their moving averages."""

    name = "unbiased"
    averages = ("var", "sqr")  # what the metrics record calls its two moving averages (metrics.jsonl keys)

    def __init__(self) -> None:
        self.ema = _BiasCorrectedEMA(0.0, 1.0)  # before the first update: var_avg = 0, sqr_avg = 1

    @property
    def updates(self) -> int:
        """How many iterations' statistics have been folded in."""
        return self.ema.updates

    def averaged(self) -> tuple[float, float]:
        """The two bias-corrected moving averages, in the order of `averages` (the metrics record's values)."""
        return self.ema.values()

    @property
    def var_avg(self) -> float:
        return self.ema.values()[0]

    @property
    def sqr_avg(self) -> float:
        return self.ema.values()[1]

    def update(self, sum_sq: float, mean_sq: float, scale: int) -> float:
        """Fold in one iteration's statistics and return its gain (update, then gain)."""
        if scale == 1:
            return 1.0
        return self.fold(*moments(sum_sq, mean_sq, scale), scale)

    def fold(self, var: float, sqr: float, scale: int, clamped: bool = True) -> float:
        """Fold in one iteration's moments σ², μ² however they were estimated and return the gain, as
        `update` does with its own (clamped unless `clamped` is False): the engine's averaging replayed on
        other moments (the lag-matched gain of reports.stats.lagmatch)."""
        if scale == 1:
            return 1.0
        if clamped:
            var, sqr = clamp(var, sqr)
        self.ema.update(var, sqr, theta(scale))
        return self.gain(scale)

    def gain(self, scale: int) -> float:
        if scale == 1:
            return 1.0
        return gain_from(*self.ema.values(), scale)

    def noise_scale(self, batch_size: float) -> float:
        """B_simple = b·σ²/μ² of the moving averages now (McCandlish et al. 2018), in examples."""
        return b_simple(*self.ema.values(), batch_size)

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ema": self.ema.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ema.load_state_dict(state["ema"])


class RatioGain(UnbiasedGain):
    """The paper's §3.4 recommendation: r = (m1 + ε) / (m2 + ε), with m1 the moving average of
    sum_sq/S (≈ σ² + μ²) and m2 that of mean_sq (≈ σ²/S + μ²), kept in [1, S]: the ratio of the true
    moments lies there (σ²/S + μ² ≤ σ² + μ² ≤ S·(σ²/S + μ²)), but averages of samples need not (sum_sq/S = 2,
    mean_sq = 10⁻³ at S = 2 reads 999), and a gain past S would step past linear scaling."""

    name = "ratio"
    averages = ("m1", "m2")

    def __init__(self) -> None:
        self.ema = _BiasCorrectedEMA(0.0, 0.0)

    def update(self, sum_sq: float, mean_sq: float, scale: int) -> float:
        if scale == 1:
            return 1.0
        self.ema.update(sum_sq / scale, mean_sq, theta(scale))
        return self.gain(scale)

    def gain(self, scale: int) -> float:
        if scale == 1:
            return 1.0
        m1, m2 = self.ema.values()
        return min(max((m1 + RATIO_EPS) / (m2 + RATIO_EPS), 1.0), float(scale))

    def noise_scale(self, batch_size: float) -> float:
        # m1 = σ² + μ², m2 = σ²/S + μ² do not separate without S; report none.
        return math.nan


class AdaptDLGain(UnbiasedGain):
    """AdaptDL's estimator (adaptdl 0.2.11, `GradientNoiseScale`), which its AdamScale reads: the same unbiased
    σ², μ² per iteration (AdaptDL writes them as (n·‖ḡ‖² − Σ‖g_i‖²/n)/(n − 1) and (Σ‖g_i‖²/n − ‖ḡ‖²)·S/(n − 1),
    algebraically `moments`), but averaged unclamped with θ = 0.999^S (the paper's estimator: 1 − S/1000, and
    clamped before averaging) and clamped only when the gain is read (σ² ≥ 10⁻⁶, μ² ≥ 0). Used by `adamscale`
    on the preconditioned statistics (bench.core.engine.precond); the spec's `estimator` still gives the records'
    plain averages and the noise scale."""

    name = "adaptdl"

    def update(self, sum_sq: float, mean_sq: float, scale: int) -> float:
        if scale == 1:
            return 1.0
        var, sqr = moments(sum_sq, mean_sq, scale)
        self.ema.update(var, sqr, 0.999**scale)
        return self.gain(scale)

    def gain(self, scale: int) -> float:
        if scale == 1:
            return 1.0
        return gain_from(*clamp(*self.ema.values()), scale)


ESTIMATORS = {"unbiased": UnbiasedGain, "ratio": RatioGain}

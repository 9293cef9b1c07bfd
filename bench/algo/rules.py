"""The learning-rate scaling rules of docs/design.md §1 as per-iteration factors of one loop.

Every method is the same loop:  η_t = m_t · w_t · lr(⌊τ_t⌋),  τ_{t+1} = τ_t + p_t,  stop when τ_t ≥ T1.
A rule only says what m_t (lr multiplier), p_t (progress on τ) and w_t (warm-up factor) are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from bench.algo.schedules import ScaleSchedule
from bench.errors import UserError

WARMUP_FRACTION = 0.055  # Goyal et al. 2017's warm-up, as a fraction of the run's iterations
TAU_RTOL = 1e-9  # τ is a float sum; "τ ≥ T1" tolerates this relative rounding error


def finished(tau: float, T1: float) -> bool:
    return tau >= T1 * (1.0 - TAU_RTOL)


def extra_warmup(iteration: int, n: int | None) -> float:
    """The textbook's extra ramp (spec `warmup_iterations`): iteration k uses (k + 1) / n of its lr for k < n."""
    return min(1.0, (iteration + 1) / n) if n else 1.0


def iterations_for(scales: ScaleSchedule, T1: float, progress: float | None = None) -> int:
    """Iterations a rule with a known progress per iteration takes to reach T1: p_t = S_t when
    `progress` is None (LSW), else the constant `progress`."""
    tau, t = 0.0, 0
    while not finished(tau, T1):
        tau += scales(tau) if progress is None else progress
        t += 1
    return t


@dataclass(frozen=True)
class Identity:
    """Single-batch SGD's rule (and plain large-batch SGD with the S = 1 schedule): m = p = w = 1."""

    name = "identity"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, 1.0, 1.0


@dataclass(frozen=True)
class AdaScale:
    """m = p = r_t: the gain stretches both the step and the clock."""

    name = "adascale"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return gain, gain, 1.0


@dataclass(frozen=True)
class LinearScalingWarmup:
    """LSW: m = p = S_t, with w_t ramping linearly from 1/S_t to 1 over the first 5.5 % of the run's
    `total_iterations`. LSW+ is the same with p = T1 / T_AS so that it runs T_AS iterations."""

    total_iterations: int
    progress: float | None = None  # None: p_t = S_t (LSW); else the constant T1 / T_AS (LSW+)
    name: str = "lsw"

    @property
    def warmup_iterations(self) -> float:
        return WARMUP_FRACTION * self.total_iterations

    def warmup(self, t: int, scale: int) -> float:
        wu = self.warmup_iterations
        if wu <= 0 or t >= wu:
            return 1.0
        return 1.0 / scale + (1.0 - 1.0 / scale) * (t / wu)

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        p = float(scale) if self.progress is None else self.progress
        return float(scale), p, self.warmup(t, scale)


@dataclass(frozen=True)
class ScaledSGD:
    """Plain SGD at scale S with its own schedule compressed into T iterations: m = 1, p = T1 / T."""

    progress: float
    name = "scaled"

    def factors(self, t: int, scale: int, gain: float) -> tuple[float, float, float]:
        return 1.0, self.progress, 1.0


def _identity(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> Identity:
    return Identity()


def _adascale(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> AdaScale:
    return AdaScale()


def _lsw(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> LinearScalingWarmup:
    return LinearScalingWarmup(iterations_for(scales, T1))


def _lsw_plus(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> LinearScalingWarmup:
    if not T_AS or T_AS < 1:
        raise UserError("lsw+ needs T_AS, the iteration count of its AdaScale run")
    n = int(round(T_AS))
    return LinearScalingWarmup(n, progress=T1 / n, name="lsw+")


def _scaled(scales: ScaleSchedule, T1: float, T_AS: float | None, T: float | None) -> ScaledSGD:
    if not T or T < 1:
        raise UserError("scaled needs T, its number of iterations (--set T=...)")
    return ScaledSGD(T1 / int(round(T)))


@dataclass(frozen=True)
class Method:
    """One row of the method table, the one home of a method: how a run of it is made, how long it is
    planned to take, what it waits for and how it is shown. The CLI, the matrix, `plan`, `status`, the
    submitter's order and the reports read it; a new method is a row here (and its test)."""

    name: str
    label: str  # Table 2's column label
    title: str  # in figures, panels and prose
    table2: bool  # a column of Table 2; at S = 1 every such column is one shared AdaScale run (r ≡ 1, no warm-up)
    needs: str | None  # the spec key another run supplies: T_AS (its AdaScale twin) or T (its grid's AdaScale runs)
    build: Callable[[ScaleSchedule, float, float | None, float | None], Any]
    # τ's progress per iteration, which bounds how many iterations a run takes before it runs:
    # "scale" p_t = S_t (exactly iterations_for), "one" p_t = 1 (T1), "gain" anywhere in between (AdaScale's
    # r_t ∈ [1, S_t], and the runs that take its count: LSW+'s T_AS, scaled SGD's T)
    pace: Literal["scale", "gain", "one"]


# The one table of methods, in the order tables, figures and status list them.
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("adascale", "AS", "AdaScale", True, None, _adascale, "gain"),
        Method("lsw", "LSW", "LSW", True, None, _lsw, "scale"),
        Method("lsw+", "LSW+", "LSW+", True, "T_AS", _lsw_plus, "gain"),
        Method("identity", "identity", "identity", False, None, _identity, "one"),
        Method("scaled", "scaled SGD", "scaled SGD", False, "T", _scaled, "gain"),
    )
}
SHARED_AT_S1 = "adascale"  # the one run that stands for every Table 2 method at S = 1


def table2_methods() -> tuple[str, ...]:
    """Table 2's methods (its columns), in the table's order; read when called, so a row added to METHODS
    shows without anything else changing."""
    return tuple(name for name, m in METHODS.items() if m.table2)


def method_order(name: str) -> int:
    """A method's place in tables, figures and status (unknown names last)."""
    return list(METHODS).index(name) if name in METHODS else len(METHODS)


def title(name: str) -> str:
    """A method's name in figures and prose (an unknown name as it is)."""
    return METHODS[name].title if name in METHODS else name


def label(name: str) -> str:
    """A method's Table 2 column label (an unknown name as it is)."""
    return METHODS[name].label if name in METHODS else name


def planned_iterations(
    method: str, scales: ScaleSchedule, T1: float, T_AS: float | None = None, T: float | None = None
) -> float | None:
    """The iterations a run is planned to take, known before it runs (the paper prints it for a diverged
    cell): the count its `needs` key carries (LSW+'s T_AS, scaled SGD's T), else its pace's (LSW's
    iterations_for, identity's T1); None where only the run can tell (AdaScale's)."""
    m = METHODS[method]
    if m.needs is not None:
        given = {"T_AS": T_AS, "T": T}[m.needs]
        return float(given) if given is not None else None
    if m.pace == "gain":
        return None
    return float(iterations_for(scales, T1, None if m.pace == "scale" else 1.0))


def make_rule(method: str, scales: ScaleSchedule, T1: float, T_AS: float | None = None, T: float | None = None) -> Any:
    """The rule object for a method name; LSW+ needs T_AS and scaled SGD needs T (iterations)."""
    if method not in METHODS:
        raise UserError(f"unknown method {method!r}; expected one of: {', '.join(METHODS)}")
    return METHODS[method].build(scales, T1, T_AS, T)

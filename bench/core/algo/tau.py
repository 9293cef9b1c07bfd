"""τ, the loop's clock in S = 1 iterations (docs/design.md §1): the stop test `finished` and τ under a known
progress per iteration in closed form, per constant-S stretch of the schedule (`advance`, `iterations_for`,
`tau_after`): what the engine's loop stops by, `plan` counts and LSW's and LEGW's rules (bench.core.algo.rules) read."""

from __future__ import annotations

import math

from bench.core.algo.schedules import ScaleSchedule

TAU_RTOL = 1e-9  # τ is a float sum; "τ ≥ T1" tolerates this relative rounding error


def finished(tau: float, T1: float) -> bool:
    return tau >= T1 * (1.0 - TAU_RTOL)


# -- τ under a known progress, in closed form ----------------------------------------------------------------
def _segments(scales: ScaleSchedule) -> list[tuple[float, int]]:
    """(τ where it starts, S) of each constant-S stretch of τ ≥ 0, in τ order: S(τ) is constant between two
    consecutive step starts, so one call of the schedule per stretch gives exactly what it gives anywhere in it."""
    cuts = sorted({0.0, *(start for start, _ in scales.steps if start > 0)})
    return [(start, scales(start)) for start in cuts]


def _steps_to(tau: float, p: float, end: float) -> int:
    """The fewest n ≥ 0 with τ + n·p ≥ end (p > 0): ⌈(end − τ)/p⌉, corrected against the float expression
    itself, so that it is exact wherever τ + n·p is (integers below 2⁵³: every τ of a pace of S_t or 1)."""
    if tau >= end:
        return 0
    n = max(1, math.ceil((end - tau) / p))
    while n > 1 and tau + (n - 1) * p >= end:
        n -= 1
    while tau + n * p < end:
        n += 1
    return n


def advance(
    scales: ScaleSchedule, T1: float, progress: float | None = None, limit: int | None = None
) -> tuple[int, float, int]:
    """(iterations, τ, Σ S_t) of the loop whose τ advances by S_t per iteration (`progress` None) or by the
    constant `progress`, until τ reaches T1 (within TAU_RTOL) or `limit` iterations: the count and τ a walk of
    the loop gives, computed per constant-S stretch of the schedule instead of per iteration, so its work grows
    with the schedule's steps, not with T1. Exactly the walk's where τ stays on integers (p_t = S_t, or 1);
    for a fractional constant progress, the real-number count, which the walk's float sum matches unless n·p
    lands within that sum's rounding (≈ n·2⁻⁵³ relative) of the stop."""
    stop = T1 * (1.0 - TAU_RTOL)
    tau, t, total = 0.0, 0, 0
    segments = _segments(scales)
    for k, (_, s) in enumerate(segments):
        end = segments[k + 1][0] if k + 1 < len(segments) else math.inf
        if tau >= end:  # a step of the stretch before went past this one
            continue
        if tau >= stop or (limit is not None and t >= limit):
            break
        p = float(s) if progress is None else float(progress)
        target = min(end, stop)
        if limit is not None:
            n = limit - t if math.isinf(target) else min(_steps_to(tau, p, target), limit - t)
        else:
            n = _steps_to(tau, p, target)
        tau, t, total = tau + n * p, t + n, total + n * s
    return t, tau, total


def iterations_for(scales: ScaleSchedule, T1: float, progress: float | None = None) -> int:
    """Iterations a rule with a known progress per iteration takes to reach T1: p_t = S_t when
    `progress` is None (LSW), else the constant `progress`."""
    return advance(scales, T1, progress)[0]


def tau_after(scales: ScaleSchedule, t: int) -> float:
    """τ after t iterations of p_t = S_t from τ = 0 (τ_t of a rule whose pace is the scale)."""
    return advance(scales, math.inf, None, limit=t)[1]

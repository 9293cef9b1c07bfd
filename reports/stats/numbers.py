"""One number per quantity: how a cell's speed-up is computed (once, here) and how each kind of number is
written (one function per kind: speed-up, Δmetric, efficiency), so the rules, the scale-free comparison, time
to target and the grid at the top print one quantity with the same digits wherever it appears."""

from __future__ import annotations

import math
from collections.abc import Iterable

MISSING = "–"  # no number (not run, not reached, undefined)


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def cell_speedup(T1: float, iterations: float) -> float:
    """A cell's speed-up in iterations: T1 (S = 1's iteration budget) / the cell's mean iterations; NaN where
    undefined. The rules, the scale-free comparison and the grid read this one number (reports.speed.scalefree)."""
    if not (_finite(T1) and _finite(iterations)) or iterations <= 0:
        return math.nan
    return T1 / iterations


def cell_efficiency(speedup: float, scale: str) -> float:
    """Efficiency: speed-up / S (1 = perfect linear scaling); NaN for an elastic schedule (no one S)."""
    try:
        s = float(scale)
    except ValueError:
        return math.nan
    return speedup / s if _finite(speedup) and s > 0 else math.nan


def speedup(v: object) -> str:
    """A speed-up as every table writes it: '15.50×' (two decimals), '–' without one."""
    return f"{v:.2f}×" if _finite(v) else MISSING


def efficiency(v: object) -> str:
    """An efficiency: '0.78' (two decimals), '–' without one."""
    return f"{v:.2f}" if _finite(v) else MISSING


def delta_digits(values: Iterable[object]) -> int:
    """The decimals a column of Δmetric needs: two, more (two significant digits, at most six) where its
    smallest non-zero value would round to 0.00 — one count for the whole column, so that it never mixes
    −0.100 and −0.10."""
    small = [abs(float(v)) for v in values if _finite(v) and v != 0]  # type: ignore[arg-type]
    if not small or min(small) >= 0.005:
        return 2
    return min(6, 1 - math.floor(math.log10(min(small))))


def delta(v: object, digits: int = 2) -> str:
    """A signed Δmetric: '+0.20', '−0.67' with the column's digits (`delta_digits`), '–' without one."""
    if not _finite(v):
        return MISSING
    return f"{float(v) + 0.0:+.{digits}f}"  # type: ignore[arg-type]  # + 0.0: no −0


def decimals(v: float) -> int:
    """The decimals a metric's value shows: three significant figures or so (94.1, 0.2564)."""
    a = abs(v)
    return 1 if a >= 100 else 2 if a >= 10 else 3 if a >= 1 else 4


def fmt_value(v: float, digits: int | None = None) -> str:
    """A few significant digits, fixed-point (accuracies 94.12, losses 0.2564); a blown-up loss that
    did not reach inf (4.86e+09) in exponent form so it cannot widen the table."""
    if v is None or not math.isfinite(v):
        return MISSING
    if abs(v) >= 1e5:
        return f"{v:.3g}"
    return f"{v:.{decimals(v) if digits is None else digits}f}"


def fmt_iterations(v: float, digits: int | None = None) -> str:
    """Iterations as a whole number, '–' without one (`digits` is accepted for `fmt_value`'s signature)."""
    return MISSING if v is None or not math.isfinite(v) else f"{round(v):d}"

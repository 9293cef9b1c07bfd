"""The positive control's graded degradation as a detection curve (issue 53.7; docs/design.md §1): each cut of
bench.experiments.degraded.GRADES (AdaScale stopped early, planned to cost ≈ 1.25Δ, 1.5Δ, 2Δ) against the table's
S = 1 by finding (i)'s rule (reports.verdicts.findings._non_inferior, as the rules grid judges it), with its measured
difference in units of Δ and the chance that rule had of calling it `worse` at its planned size, at the realised
spreads and seeds (`decision_power` at a true −kΔ, by its symmetry): a detector that catches 2Δ but not 1.25Δ
says where its resolution ends. Printed after the rules at a glance; one line per table that ran a cut."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.core.algo.rules import ADASCALE
from bench.experiments.degraded import GRADES
from reports.rundata.collect import Results, scale_order
from reports.stats.noninferiority import compare, decision_power, fixed_scales, metric_values
from reports.tables.table2 import confirmatory, table_runs, tables
from reports.verdicts import findings as FD


@dataclass(frozen=True)
class Grade:
    """One cut at one S of one table: planned size k (in Δ), measured difference and interval (in Δ), its rule
    verdict, and the chance of `worse` at a true −kΔ at the realised spreads."""

    table: str
    scale: str
    size: float
    diff: float
    lo: float
    hi: float
    status: str
    power: float
    n: int
    n_base: int


def _power(x: np.ndarray, base: np.ndarray, delta: float, size: float) -> float:
    """P(`worse`) at a true difference of −size·Δ: `decision_power` at (size − 2)·Δ (its docstring's symmetry)."""
    if min(len(x), len(base)) < 2 or not (math.isfinite(delta) and delta > 0):
        return math.nan
    sd, sdb = float(np.std(x, ddof=1)), float(np.std(base, ddof=1))
    if not (sd > 0 and sdb > 0):
        return math.nan
    return decision_power(sd, delta, len(x), (size - 2) * delta, n_base=len(base), sd_base=sdb)


def detection(res: Results) -> list[Grade]:
    """Every graded cut the folder ran, per table and S, by planned size."""
    df = table_runs(res.runs)
    out: list[Grade] = []
    if df.empty:
        return out
    for tab in tables(df):
        t = confirmatory(tab.runs)[0]
        base = fixed_scales(t, ADASCALE).get("1")
        cuts = [m for m in GRADES if m in set(t["method"])]
        if base is None or not cuts:
            continue
        margin = FD.margin_of(res, t, tab.higher)
        b = metric_values(base)
        for method in sorted(cuts, key=lambda m: GRADES[m][1]):
            for scale, g in fixed_scales(t, method).items():
                if scale == "1":
                    continue
                x = metric_values(g)
                c = compare(x, b, tab.higher, margin.delta, margin.bounds(tab.higher), margin.share)
                status, _ = FD._non_inferior([(f"S = {scale}", g, base)], tab.higher, margin)
                size, d = GRADES[method][1], c.margin
                power = _power(x, b, d, size)
                out.append(Grade(tab.name, scale, size, c.diff / d, c.lo / d, c.hi / d, status, power, c.n, c.n_base))
    return sorted(out, key=lambda g: (g.table, scale_order(g.scale), g.size))


def text(grades: list[Grade]) -> str:
    """'control logreg: graded degradation (detection curve) — S = 16: cut ≈ 1.25Δ −1.31Δ [−1.62, −1.00] does not
    hold, P(worse) at 1.25Δ 0.71; …' per table; "" where no cut ran."""
    lines = []
    for table in dict.fromkeys(g.table for g in grades):
        parts = []
        for g in (g for g in grades if g.table == table):
            span = f" [{g.lo:+.2f}, {g.hi:+.2f}]" if math.isfinite(g.lo) else ""
            power = f"{g.power:.2f}" if math.isfinite(g.power) else "–"
            parts.append(
                f"S = {g.scale}: cut ≈ {g.size:g}Δ {g.diff:+.2f}Δ{span} (n={g.n} vs {g.n_base}) {g.status}, "
                f"P(worse) at {g.size:g}Δ at the realised spreads {power}"
            )
        lines.append(f"{table}: graded degradation (detection curve) — " + "; ".join(parts))
    return "\n".join(lines)

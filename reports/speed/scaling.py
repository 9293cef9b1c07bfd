"""How a results folder's runs scale with S, for any folder (the positive control, bench/experiments/matrices/
control.yaml, is read with it): speed-ups against S beside the paper's and AdaScale's against S·b / B_simple
(reports.speed.speedup), time to target (reports.speed.timetotarget) and, here, B_crit: every fit with whether it
agrees with
the other source's, its HTML, the flags `report` prints and the folder's CSVs.

- B_crit of the Table 2 cells: steps to target (time-to-target iterations) against S·b, per table and method
  with ≥ 3 fixed S that every seed reached, fitted with a bootstrap interval over seeds (reports.speed.critical).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.methods import title
from reports.rundata import guards
from reports.rundata.collect import Results
from reports.speed.speedup import speedups
from reports.speed.timetotarget import UNRESOLVED, speedup_text, time_to_target, ttt_summary
from reports.speed.timetotarget import ttt_html as ttt_html


def flags_text(fits: pd.DataFrame, summary: pd.DataFrame, names: dict[str, str] | None = None) -> str:
    """What `report` prints after the rules: each B_crit fit that disagrees with the other source's fit of
    the same series, and each time-to-target speed-up that is unresolved, one line each ('' when none); a
    variant by its short name (`names`: Results.variants), never its override string."""
    lines = []
    named = lambda v: (names or {}).get(v, v) if isinstance(v, str) else v  # noqa: E731
    for r in fits.itertuples() if not fits.empty else ():
        if isinstance(r.agrees, str) and r.agrees.startswith("no"):
            what = f"{r.task}{f' [{named(r.variant)}]' if r.variant else ''} {r.method}, {r.source}"
            value = f"{r.B_crit:,.0f} [{r.B_crit_lo:,.0f}, {r.B_crit_hi:,.0f}]"
            lines.append(f"B_crit {what} {value} DISAGREES with {r.agrees[4:]}")
    for r in summary.itertuples() if not summary.empty else ():
        if str(r.speedup_status).startswith(UNRESOLVED):
            what = f"{r.task}{f' [{named(r.variant)}]' if r.variant else ''} S = {r.scale} {r.method}"
            why = str(r.speedup_status).partition(": ")[2]
            lines.append(f"time to target {what}: speed-up {speedup_text(r)}, {why}")
    return "".join(f"{line}\n" for line in lines)


def critical_table(res: Results, ttt: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every B_crit fit of the results (reports.speed.critical COLUMNS): the sweep's, then Table 2's, each with
    whether it agrees with the other source's fit of the same task, variant, method and target."""
    from reports.speed.critical import COLUMNS, agreement
    from reports.speed.sweep import critical_batches

    sweep = critical_batches(res).assign(source="sweep", variant="")
    t2 = table2_critical(time_to_target(res) if ttt is None else ttt)
    parts = [p for p in (sweep.reindex(columns=COLUMNS), t2) if not p.empty]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    fits = pd.concat(parts, ignore_index=True)
    return fits.assign(agrees=agreement(fits))


def write_csvs(res: Results, dest: Path, ttt: pd.DataFrame | None = None, fits: pd.DataFrame | None = None) -> None:
    """time_to_target.csv (one row per run), time_to_target_cells.csv (ttt_summary: one row per cell, with
    the speed-up's status), speedup.csv and b_crit.csv under `dest`."""
    from bench.core.files import atomic_write_bytes
    from reports.speed.critical import write_csv as write_critical

    ttt = time_to_target(res) if ttt is None else ttt
    for name, table in (
        ("time_to_target.csv", ttt),
        ("time_to_target_cells.csv", ttt_summary(ttt)),
        ("speedup.csv", speedups(res)),
    ):  # no cell a formula (reports.rundata.guards)
        text = guards.csv_safe(table).to_csv(index=False, float_format="%.6g")
        atomic_write_bytes(dest / name, text.encode(errors="backslashreplace"))
    write_critical(critical_table(res, ttt) if fits is None else fits, dest / "b_crit.csv")


def table2_critical(ttt: pd.DataFrame) -> pd.DataFrame:
    """B_crit (reports.speed.critical COLUMNS) of every table and method with ≥ 3 fixed scales whose seeds all
    reached the target: steps to target = time-to-target iterations, batch = S·b."""
    from reports.speed.critical import COLUMNS, fit_series, measures

    rows = []
    if ttt.empty:
        return pd.DataFrame(columns=COLUMNS)
    fixed = ttt[np.isfinite(pd.to_numeric(ttt["batch"], errors="coerce"))]
    for (task, variant, method), g in fixed.groupby(["task", "variant", "method"], sort=False):
        fit = fit_series(g.assign(steps=g["iterations"], window=g["resolution"]))
        if fit is not None:
            targets = pd.to_numeric(g["target"], errors="coerce").unique()
            fit |= {"target": float(targets[0]) if len(targets) == 1 else math.nan, "agrees": ""}
            fit["measures"] = measures("table2", str(method))
            rows.append({"source": "table2", "task": task, "variant": variant, "method": method, **fit})
    return pd.DataFrame(rows, columns=COLUMNS)


def critical_html(
    fits: pd.DataFrame, noise: dict[str, np.ndarray] | None = None, variants: dict[str, str] | None = None
) -> str:
    """Every B_crit fit (report/b_crit.csv), one line each with what it measures and whether it agrees with
    the other source's fit of the same series; then the B_simple notes and that no critical batch was
    measured (nothing without fits). A variant by its short name (reports.rundata.variants)."""
    import html

    from reports.speed.critical import NO_CRITICAL, describe
    from reports.speed.sweep import SWEEP_METHODS, b_simple_note

    if fits.empty:
        return ""
    lines = []
    for r in fits.itertuples():
        variant = f" [{(variants or {}).get(r.variant, r.variant)}]" if isinstance(r.variant, str) and r.variant else ""
        where = "sweep" if r.source == "sweep" else "Table 2 time to target"
        name = SWEEP_METHODS.get(r.method, r.method) if r.source == "sweep" else title(r.method)
        agrees = str(r.agrees) if isinstance(r.agrees, str) else ""
        flag = f" — DISAGREES with {agrees[4:]} (beyond both intervals)" if agrees.startswith("no") else ""
        flag = flag or (" — agrees with the other source's fit" if agrees == "yes" else "")
        lines.append(f"{r.task}{variant}, {name} ({where}, {r.n_points} batches): {describe(r)} — {r.measures}{flag}")
    lines += [f"{task}: {b_simple_note(b)}" for task, b in (noise or {}).items() if len(b)]
    legend = (
        "B_crit = E_min/S_min of McCandlish et al.'s steps–examples trade-off S = S_min(1 + B_crit/B), fitted on "
        "log steps to the batches every seed reached; interval: 95 % percentile bootstrap over seeds and "
        "evaluation windows plus a residual bootstrap of the fit's misfit beyond them (τ, in log steps), so a curve "
        "the data do not follow gets a wide interval; where B_crit refitted on each half of the batches differs beyond "
        "the seeds, the value depends on the range measured and the interval is stretched to hold both; 'seeds "
        "alone' is the interval without either. Fits of the same "
        "task, method and target from the sweep and Table 2 whose intervals do not overlap are flagged. A fit "
        "whose B_crit lies outside the batches measured is degenerate (no knee in the data) and only bounded. "
        f"{NO_CRITICAL} All fits: b_crit.csv."
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f'<h3 id="b-crit">Critical batch</h3><ul>{items}</ul><p class="legend">{html.escape(legend)}</p>'

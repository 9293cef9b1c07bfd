"""The comparison with the paper on scale-free terms: per task, method and S, three numbers that do not
depend on the absolute size of a run, ours beside the paper's (reports/tables/paper_table2.csv).

- Δmetric = mean validation metric at S − mean at S = 1 of the same method (and the same table), signed so
  that positive is better, as the findings are: for a loss (logreg) S = 1's mean minus S's;
- speed-up = T1 / iterations: S = 1 runs T1 iterations (ours: the runs' `T1` from spec.json; the
  paper's: its S = 1 row's iterations);
- efficiency = T1 / (S · iterations): 1 is perfect linear scaling (empty for elastic rows, whose S varies).
- quality: a cell that misses S = 1's quality — its Δmetric below −Δ, the findings' margin of the table
  (reports.stats.noninferiority.table_margin) — or that has a failed seed (diverged, or collapsed:
  reports.rundata.failedseeds), is flagged ("worse than S = 1 by more than Δ", "diverged", "a seed collapsed to
  chance"): a speed-up bought with the metric is not a speed-up, and the tables and figures say so.

A diverged cell has no Δmetric; its speed-up and efficiency come from its planned iterations (Table 2's
rule), as the paper's own diverged cells do. Tiny runs compare here (and only here) with the paper: their
absolute values mean nothing at the paper's scale, these ratios do.
"""

from __future__ import annotations

import math

import pandas as pd

from bench.core.algo.rules import method_order
from bench.core.methods import title
from reports.rundata import guards
from reports.rundata.collect import scale_order
from reports.stats import numbers as N
from reports.stats.noninferiority import table_margin
from reports.tables.table2 import table_runs

COLUMNS = [
    "table",
    "task",
    "preset",
    "method",
    "scale",
    "n_seeds",
    "diverged",
    "T1",
    "iterations",
    "d_metric",
    "speedup",
    "efficiency",
    "quality",
    "paper_diverged",
    "paper_T1",
    "paper_iterations",
    "paper_d_metric",
    "paper_speedup",
    "paper_efficiency",
]
PAPER_COLUMNS = ["task", "scale", "total_batch", "method", "val_metric", "train_loss", "iterations", "diverged"]
SIDE = ["table", "task", "preset", "method", "scale", "n_seeds", "diverged", "T1", "iterations"]
SIDE += ["d_metric", "speedup", "efficiency", "quality"]
WORSE_FLAG, DIVERGED_FLAG = "worse than S = 1 by more than Δ", "diverged"
COLLAPSED_FLAG = "a seed collapsed"  # a failed seed, as a divergence is (reports.rundata.failedseeds)


def _ratios(scale: str, T1: float, iterations: float) -> tuple[float, float]:
    """(speed-up T1 / iterations, efficiency T1 / (S · iterations)); NaN where undefined (reports.stats.numbers)."""
    speedup = N.cell_speedup(T1, iterations)
    return speedup, N.cell_efficiency(speedup, scale)


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def ours(c: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Our side, from Table 2's cells (`table2.cells`) and the runs' T1 (spec.json)."""
    if c.empty:
        return _frame([], SIDE)
    tr = table_runs(runs)
    tr = tr.assign(preset=tr["preset"].fillna(""), variant=tr["variant"].fillna("")).dropna(subset=["T1"])
    t1 = tr.groupby(["task", "preset", "variant"])["T1"].median() if not tr.empty else pd.Series(dtype=float)
    rows = []
    margins = _margins(c, tr)
    for r in c.itertuples():
        T1 = float(t1.get((r.task, r.preset, r.variant), math.nan))
        base = c[(c["table"] == r.table) & (c["scale"] == "1") & (c["method"] == r.method)]
        base_metric = float(base["val_metric"].iloc[0]) if len(base) else math.nan
        sign = 1.0 if bool(r.higher_is_better) else -1.0
        d = sign * (r.val_metric - base_metric) + 0.0 if not r.diverged else math.nan  # + 0.0: no −0
        speedup, eff = _ratios(r.scale, T1, r.iterations)
        delta = margins.get(r.table, math.nan)
        quality = (
            DIVERGED_FLAG if r.diverged else COLLAPSED_FLAG if r.n_collapsed > 0 else WORSE_FLAG if d < -delta else ""
        )
        rows.append(
            {
                "table": r.table,
                "task": r.task,
                "preset": r.preset,
                "method": r.method,
                "scale": r.scale,
                "n_seeds": int(r.n_seeds),
                "diverged": bool(r.diverged),
                "T1": T1,
                "iterations": r.iterations,
                "d_metric": d if math.isfinite(d) else math.nan,
                "speedup": speedup,
                "efficiency": eff,
                "quality": quality,
            }
        )
    return _frame(rows, SIDE)


def _margins(c: pd.DataFrame, tr: pd.DataFrame) -> dict[str, float]:
    """Each table's findings margin Δ (reports.stats.noninferiority.table_margin) from its S = 1 runs' metric values."""
    out = {}
    for (table, task, preset, variant), g in c.groupby(["table", "task", "preset", "variant"], sort=False):
        runs = tr[(tr["task"] == task) & (tr["preset"] == preset) & (tr["variant"] == variant)]
        base = runs[(runs["scale"] == "1") & (runs["status"] == "completed")]
        vals = pd.to_numeric(base.drop_duplicates("run_dir")["val_metric"], errors="coerce").dropna().to_numpy(float)
        out[table] = table_margin(task, preset, bool(g["higher_is_better"].iloc[0]), vals).delta
    return out


def paper_side(paper: pd.DataFrame) -> pd.DataFrame:
    """The same three numbers from the paper's Table 2 (T1 = its S = 1 row's iterations)."""
    rows = []
    for (task, method), g in paper.groupby(["task", "method"], sort=False):
        base = g[g["scale"] == "1"]
        T1 = float(base["iterations"].iloc[0]) if len(base) else math.nan
        base_metric = float(base["val_metric"].iloc[0]) if len(base) else math.nan
        for r in g.itertuples():
            speedup, eff = _ratios(r.scale, T1, float(r.iterations))
            d = math.nan if r.diverged else float(r.val_metric) - base_metric  # every paper metric: higher is better
            rows.append(
                {
                    "task": task,
                    "method": method,
                    "scale": r.scale,
                    "paper_diverged": bool(r.diverged),
                    "paper_T1": T1,
                    "paper_iterations": float(r.iterations),
                    "paper_d_metric": d,
                    "paper_speedup": speedup,
                    "paper_efficiency": eff,
                }
            )
    return pd.DataFrame(rows, columns=["task", "method", "scale", *COLUMNS[13:]])


def scalefree(c: pd.DataFrame, runs: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Ours beside the paper's, per (table, method, S): the union of both sides' scales, for every table
    (a task not in the paper keeps empty paper columns)."""
    mine = ours(c, runs)
    theirs = paper_side(paper)
    parts = []
    for (table, task, preset), m in mine.groupby(["table", "task", "preset"], sort=False):
        p = theirs[theirs["task"] == task].assign(table=table, preset=preset)
        parts.append(m.merge(p, on=["table", "task", "preset", "method", "scale"], how="outer"))
    if not parts:
        return _frame([], COLUMNS)
    out = pd.concat(parts, ignore_index=True).reindex(columns=COLUMNS)
    out["_s"] = out["scale"].map(scale_order)
    out["_m"] = out["method"].map(method_order)
    return out.sort_values(["table", "_m", "_s"], kind="stable").drop(columns=["_s", "_m"]).reset_index(drop=True)


def _f(v: float, fmt: str) -> str:
    return "–" if v is None or not isinstance(v, int | float) or not math.isfinite(v) else format(v, fmt)


def signed(v: float) -> str:
    """A signed difference with the digits it needs: +1.25, −69.60, +0.0027."""
    if v is None or not isinstance(v, int | float) or not math.isfinite(v):
        return "–"
    digits = 2 if v == 0 or abs(v) >= 0.1 else min(6, 1 - math.floor(math.log10(abs(v))))
    return f"{v:+.{digits}f}"


def paper_quality(d_metric: float, diverged: bool, margin: float | None) -> str:
    """How the paper's own cell reads where it lost S = 1's quality, else "": "N/A" where it diverged, its
    Δmetric (`signed`) where that is below −margin (the paper preset's: cifar10 LSW S = 64's −17.50). The
    scale-free table greys these cells and the Table 2 efficiency figure crosses them, both by this rule."""
    if diverged:
        return "N/A"
    worse = margin is not None and isinstance(d_metric, float) and math.isfinite(d_metric) and d_metric < -margin
    return signed(d_metric) if worse else ""


def _delta(values: pd.Series, diverged: pd.Series) -> list[str]:
    """Δmetric as text, one count of digits for the column (reports.stats.numbers): N/A for a diverged cell, – where
    there is no value."""
    digits = N.delta_digits(values)
    return [
        "N/A" if d == d and d is not None and bool(d) else N.delta(v, digits)
        for v, d in zip(values, diverged, strict=True)
    ]


SIGN_NOTE = "Δmetric: + = better than S = 1 (a lower loss, a higher accuracy)"


def text(sf: pd.DataFrame) -> str:
    """The table as a person reads it (plain text, one block per table)."""
    if sf.empty:
        return "(no Table 2 runs)"
    out = []
    for table, t in sf.groupby("table", sort=False):
        show = pd.DataFrame(
            {
                "method": t["method"].map(title),
                "S": t["scale"],
                "seeds": t["n_seeds"].map(lambda v: _f(v, ".0f")),
                "Δmetric (+ better)": _delta(t["d_metric"], t["diverged"]),
                "speed-up": t["speedup"].map(N.speedup),
                "eff.": t["efficiency"].map(N.efficiency),
                "quality": t["quality"].fillna("").map(lambda q: f"✗ {q}" if q else ""),
                "paper Δmetric": _delta(t["paper_d_metric"], t["paper_diverged"]),
                "paper speed-up": t["paper_speedup"].map(N.speedup),
                "paper eff.": t["paper_efficiency"].map(N.efficiency),
            }
        )
        out.append(f"{table}\n{show.to_string(index=False)}")
    return "\n\n".join(out) + f"\n{SIGN_NOTE}; quality ✗: a speed-up bought with the metric (or a divergence)."


def to_csv(sf: pd.DataFrame) -> str:
    return guards.csv_safe(sf).to_csv(index=False, float_format="%.6g")  # no cell a formula

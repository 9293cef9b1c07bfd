"""The comparison with the paper on scale-free terms: per task, method and S, three numbers that do not
depend on the absolute size of a run, ours beside the paper's (reports/paper_table2.csv).

- Δmetric = mean validation metric at S − mean at S = 1 of the same method (and the same table);
- speed-up = T1 / iterations: S = 1 runs T1 iterations (ours: the runs' `T1` from spec.json; the
  paper's: its S = 1 row's iterations);
- efficiency = T1 / (S · iterations): 1 is perfect linear scaling (empty for elastic rows, whose S varies).

A diverged cell has no Δmetric; its speed-up and efficiency come from its planned iterations (Table 2's
rule), as the paper's own diverged cells do. Tiny runs compare here (and only here) with the paper: their
absolute values mean nothing at the paper's scale, these ratios do.
"""

from __future__ import annotations

import math

import pandas as pd

from bench.algo.rules import method_order

from .collect import scale_order
from .table2 import table_runs

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
    "paper_diverged",
    "paper_T1",
    "paper_iterations",
    "paper_d_metric",
    "paper_speedup",
    "paper_efficiency",
]
PAPER_COLUMNS = ["task", "scale", "total_batch", "method", "val_metric", "train_loss", "iterations", "diverged"]
SIDE = ["table", "task", "preset", "method", "scale", "n_seeds", "diverged", "T1", "iterations"]
SIDE += ["d_metric", "speedup", "efficiency"]


def _ratios(scale: str, T1: float, iterations: float) -> tuple[float, float]:
    """(speed-up T1 / iterations, efficiency T1 / (S · iterations)); NaN where undefined."""
    if not (math.isfinite(T1) and math.isfinite(iterations)) or iterations <= 0:
        return math.nan, math.nan
    speedup = T1 / iterations
    numeric = scale_order(scale)[0] == 0
    return speedup, speedup / float(scale) if numeric else math.nan


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
    for r in c.itertuples():
        T1 = float(t1.get((r.task, r.preset, r.variant), math.nan))
        base = c[(c["table"] == r.table) & (c["scale"] == "1") & (c["method"] == r.method)]
        base_metric = float(base["val_metric"].iloc[0]) if len(base) else math.nan
        d = r.val_metric - base_metric if not r.diverged else math.nan
        speedup, eff = _ratios(r.scale, T1, r.iterations)
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
            }
        )
    return _frame(rows, SIDE)


def paper_side(paper: pd.DataFrame) -> pd.DataFrame:
    """The same three numbers from the paper's Table 2 (T1 = its S = 1 row's iterations)."""
    rows = []
    for (task, method), g in paper.groupby(["task", "method"], sort=False):
        base = g[g["scale"] == "1"]
        T1 = float(base["iterations"].iloc[0]) if len(base) else math.nan
        base_metric = float(base["val_metric"].iloc[0]) if len(base) else math.nan
        for r in g.itertuples():
            speedup, eff = _ratios(r.scale, T1, float(r.iterations))
            d = math.nan if r.diverged else float(r.val_metric) - base_metric
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
    return pd.DataFrame(rows, columns=["task", "method", "scale", *COLUMNS[12:]])


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


def _delta(values: pd.Series, diverged: pd.Series) -> list[str]:
    """Δmetric as text: N/A for a diverged cell, – where there is no value."""
    return [
        "N/A" if d == d and d is not None and bool(d) else _f(v, "+.2f") for v, d in zip(values, diverged, strict=True)
    ]


def text(sf: pd.DataFrame) -> str:
    """The table as a person reads it (plain text, one block per table)."""
    if sf.empty:
        return "(no Table 2 runs)"
    out = []
    for table, t in sf.groupby("table", sort=False):
        show = pd.DataFrame(
            {
                "method": t["method"],
                "S": t["scale"],
                "seeds": t["n_seeds"].map(lambda v: _f(v, ".0f")),
                "Δmetric": _delta(t["d_metric"], t["diverged"]),
                "speed-up": t["speedup"].map(lambda v: _f(v, ".2f")),
                "eff.": t["efficiency"].map(lambda v: _f(v, ".2f")),
                "paper Δmetric": _delta(t["paper_d_metric"], t["paper_diverged"]),
                "paper speed-up": t["paper_speedup"].map(lambda v: _f(v, ".2f")),
                "paper eff.": t["paper_efficiency"].map(lambda v: _f(v, ".2f")),
            }
        )
        out.append(f"{table}\n{show.to_string(index=False)}")
    return "\n\n".join(out)


def to_csv(sf: pd.DataFrame) -> str:
    return sf.to_csv(index=False, float_format="%.6g")

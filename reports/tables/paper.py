"""Our Table 2 beside the paper's (reports/tables/paper_table2.csv, a copy of the paper's Table 2).

Cells are matched on task, scale (elastic rows by name) and method. Differences are ours − paper, for
the validation metric, the training loss and the iterations, where both sides have a number. A paper
cell with diverged=true is N/A (its iterations are still given). Only tasks that appear in both
tables are compared. Where the paper's number is another form of the metric than Table 2's (the task
card's `paper_metric`: the transformer's tokenised `bleu_tok`, not the detokenised `bleu`), ours is the
mean of that key of the seeds' last evaluation, and `metric_key` says which.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.core.algo.rules import method_order
from reports.rundata.collect import eval_value, paper_metric, scale_order, scale_str
from reports.tables.table2 import table_runs

PAPER_CSV = Path(__file__).with_name("paper_table2.csv")
QUANTS = (("val_metric", "metric"), ("train_loss", "loss"), ("iterations", "iterations"))
COMPARISON_COLUMNS = [
    "table",
    "task",
    "preset",
    "scale",
    "method",
    "total_batch_ours",
    "total_batch_paper",
    "n_seeds",
    "metric_key",
    "status_ours",
    "status_paper",
    "metric_ours",
    "metric_paper",
    "metric_diff",
    "loss_ours",
    "loss_paper",
    "loss_diff",
    "iterations_ours",
    "iterations_paper",
    "iterations_diff",
]


def load_paper(path: Path | None = None) -> pd.DataFrame:
    """The paper's Table 2: task, scale (str), total_batch, method, val_metric, train_loss, iterations,
    diverged (bool)."""
    df = pd.read_csv(path or PAPER_CSV, dtype={"task": str, "scale": str, "method": str})
    df["scale"] = df["scale"].map(scale_str)
    df["diverged"] = df["diverged"].astype(str).str.strip().str.lower().isin(("true", "1", "yes"))
    for col in ("total_batch", "val_metric", "train_loss", "iterations"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def _f(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def paper_form(runs: pd.DataFrame | None, task: str, preset: str, variant: str) -> dict[tuple[str, str], float]:
    """(scale, method) -> the mean over completed seeds of the task's `paper_metric` ({} when the task has
    none, or no runs are given)."""
    key = paper_metric(task)
    if runs is None or runs.empty or key is None:
        return {}
    t = table_runs(runs)
    t = t[(t["task"] == task) & (t["preset"] == preset) & (t["variant"] == variant) & (t["status"] == "completed")]
    out = {}
    for (scale, method), g in t.groupby(["scale", "method"]):
        v = pd.Series([eval_value(e, key) for e in g["eval"]], dtype=float).dropna()
        out[(scale, method)] = float(v.mean()) if len(v) else math.nan
    return out


def compare(c: pd.DataFrame, paper: pd.DataFrame | None = None, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (our table, scale, method) of the union of our cells and the paper's, for the
    tasks in both; with `runs`, a task's `paper_metric` stands in for our metric (see the docstring)."""
    paper = load_paper() if paper is None else paper
    rows = []
    for name, t in c.groupby("table", sort=False):
        task = t["task"].iloc[0]
        p = paper[paper["task"] == task]
        if p.empty:
            continue
        pm = paper_metric(task) if runs is not None else None
        alt = paper_form(runs, task, t["preset"].iloc[0], t["variant"].iloc[0])
        ours = {(r.scale, r.method): r for r in t.itertuples()}
        theirs = {(r.scale, r.method): r for r in p.itertuples()}
        keys = sorted(set(ours) | set(theirs), key=lambda k: (scale_order(k[0]), method_order(k[1])))
        for key in keys:
            o, q = ours.get(key), theirs.get(key)
            row = {"table": name, "task": task, "preset": t["preset"].iloc[0], "scale": key[0], "method": key[1]}
            if o is None or (o.n_seeds == 0 and not o.diverged):
                row["status_ours"], row["n_seeds"] = "missing", 0 if o is None else int(o.n_seeds)
            else:
                row["status_ours"], row["n_seeds"] = ("na" if o.diverged else "value"), int(o.n_seeds)
            row["status_paper"] = "missing" if q is None else "na" if q.diverged else "value"
            row["metric_key"] = pm or (t["metric"].iloc[0] if "metric" in t else "")
            row["total_batch_ours"] = _f(o.total_batch) if o is not None else math.nan
            row["total_batch_paper"] = _f(q.total_batch) if q is not None else math.nan
            for col, short in QUANTS:
                ov = _f(getattr(o, col)) if o is not None and row["status_ours"] != "missing" else math.nan
                if col == "val_metric" and pm is not None and math.isfinite(ov):
                    ov = alt.get(key, math.nan)  # the paper's form of the metric
                pv = _f(getattr(q, col)) if q is not None else math.nan
                if q is not None and q.diverged and col != "iterations":
                    pv = math.nan
                row[f"{short}_ours"], row[f"{short}_paper"] = ov, pv
                row[f"{short}_diff"] = ov - pv if math.isfinite(ov) and math.isfinite(pv) else math.nan
            rows.append(row)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def header_note(comp: pd.DataFrame) -> str:
    """The caveat for the section header: tiny-preset values are not comparable with the paper's."""
    presets = sorted({p for p in comp["preset"].dropna() if p}) if not comp.empty else []
    if "tiny" in presets:
        return (
            "tiny preset: small models on small synthetic data — these values are NOT comparable with the "
            "paper's; the table shows that the pipeline works, not that the paper reproduces."
        )
    return ""

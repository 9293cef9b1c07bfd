"""The gradient-noise scale B_simple = b·σ²/μ² (McCandlish et al. 2018) of each AdaScale run, read from the
run's own statistics: over τ (the curves figure) and as a training average (Table 2's notes, the findings).

The formulas are bench.algo.gain's (`b_simple`, `b_simple_average`, `UnbiasedGain`); over a run's arrays
the same arithmetic at numpy speed, tested equal to them bit for bit:
- the training average is summary.json's `B_simple` where the run wrote one, else the same function over
  the (sum_sq, mean_sq, scale) of its metrics.jsonl records — old runs get it too;
- the trajectory is b·var/sqr of the moving averages AdaScale recorded (`var`, `sqr`, the unbiased
  estimator's), else those averages replayed with `UnbiasedGain` from sum_sq and mean_sq (a run made
  with the ratio estimator, or before the averages were recorded).

Metrics columns read: train `tau`, `scale`, `sum_sq`, `mean_sq` (and `var`, `sqr` when present).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from bench.algo.gain import UnbiasedGain, b_simple, moments

from .collect import Results, scale_order

COLUMN = "B_simple"


def _stats(train: pd.DataFrame) -> pd.DataFrame:
    """sum_sq, mean_sq, scale of the training records that carry statistics (S ≥ 2), as floats."""
    if train.empty or not {"sum_sq", "mean_sq", "scale"} <= set(train.columns):
        return pd.DataFrame(columns=["tau", "sum_sq", "mean_sq", "scale"])
    cols = [c for c in ("tau", "sum_sq", "mean_sq", "scale", "var", "sqr") if c in train]
    d = numeric(train[cols])
    return d[np.isfinite(d["sum_sq"]) & np.isfinite(d["mean_sq"]) & (d["scale"] >= 2)]


def average(train: pd.DataFrame, batch_size: float) -> float:
    """The training average of B_simple of one run's training records (NaN without statistics)."""
    d = _stats(train)
    if d.empty or not math.isfinite(batch_size):
        return math.nan
    return b_simple_average_of(
        d["sum_sq"].to_numpy(float), d["mean_sq"].to_numpy(float), d["scale"].astype(int), batch_size
    )


def numeric(d: pd.DataFrame) -> pd.DataFrame:
    """The columns as numbers (anything else NaN): pd.to_numeric of each, skipped where every column
    already is one (the cached metrics' float64 columns), where it changes nothing."""
    if all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in d.dtypes):
        return d
    return d.apply(pd.to_numeric, errors="coerce")


def b_simple_average_of(sum_sq: np.ndarray, mean_sq: np.ndarray, scale: Any, batch_size: float) -> float:
    """bench.algo.gain.b_simple_average over arrays: the same `moments` per record (elementwise, the same
    IEEE operations), summed in the same order (np.add.accumulate is sequential, not pairwise) and divided
    the same way, so equal to it bit for bit (tests/reports/test_noise_arrays.py) at numpy speed."""
    n = np.asarray(scale, dtype=np.int64)
    keep = (n >= 2) & np.isfinite(sum_sq) & np.isfinite(mean_sq)
    count = int(keep.sum())
    if not count:
        return math.nan
    var, sqr = moments(sum_sq[keep], mean_sq[keep], n[keep])
    return b_simple(float(np.add.accumulate(var)[-1]) / count, float(np.add.accumulate(sqr)[-1]) / count, batch_size)


def b_simple_of(var: np.ndarray, sqr: np.ndarray, batch_size: float) -> np.ndarray:
    """bench.algo.gain.b_simple of each (var, sqr): b·max(var, 0)/sqr, inf where sqr ≤ 0 (max(var, 0.0) is
    var unless var < 0, NaN included), equal to it bit for bit."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(sqr > 0, batch_size * np.where(var < 0.0, 0.0, var) / np.where(sqr > 0, sqr, 1.0), math.inf)


def trajectory(train: pd.DataFrame, batch_size: float) -> pd.DataFrame:
    """(tau, B_simple) after each iteration with statistics: what AdaScale's moving averages said."""
    d = _stats(train)
    if d.empty or not math.isfinite(batch_size) or "tau" not in d:
        return pd.DataFrame(columns=["tau", COLUMN])
    if {"var", "sqr"} <= set(d.columns) and np.isfinite(d[["var", "sqr"]].to_numpy(float)).all():
        values = b_simple_of(d["var"].to_numpy(float), d["sqr"].to_numpy(float), batch_size)
    else:
        est, values = UnbiasedGain(), []
        for s, m, scale in zip(d["sum_sq"], d["mean_sq"], d["scale"].astype(int), strict=True):
            est.update(float(s), float(m), scale)
            values.append(est.noise_scale(batch_size))
    out = pd.DataFrame({"tau": d["tau"].to_numpy(float), COLUMN: np.asarray(values, float)})
    return out[np.isfinite(out[COLUMN])]


def _wanted(runs: pd.DataFrame) -> pd.Series:
    """AdaScale runs whose largest S is ≥ 2: the ones that measure a noise scale."""
    if runs.empty:
        return pd.Series(False, index=runs.index)
    top = pd.to_numeric(runs["max_scale"], errors="coerce")
    return (runs["method"] == "adascale") & (top >= 2) & runs["status"].isin(("completed", "diverged"))


def fill(res: Results) -> pd.DataFrame:
    """res.runs with the `B_simple` column filled for every AdaScale run with S ≥ 2 that lacks one in its
    summary (computed from its metrics.jsonl; inf where Σμ² ≤ 0). Idempotent."""
    runs = res.runs
    if COLUMN not in runs:
        runs[COLUMN] = math.nan
    todo = _wanted(runs) & ~np.isfinite(pd.to_numeric(runs[COLUMN], errors="coerce").to_numpy(float))
    todo &= runs["has_metrics"].astype(bool)
    for i in runs.index[todo]:
        train, _ = res.metrics(runs.at[i, "run_dir"])
        runs.at[i, COLUMN] = average(train, float(runs.at[i, "batch_size"]))
    res.runs = runs
    return runs


def per_run(t: pd.DataFrame) -> pd.DataFrame:
    """The fixed-S AdaScale runs (S ≥ 2, completed) of one table with a measured B_simple (after `fill`)."""
    if t.empty or COLUMN not in t:
        return t.iloc[0:0]
    fixed = t["scale"].map(lambda s: scale_order(s)[0] == 0 and scale_order(s)[1] >= 2)
    g = t[fixed & (t["method"] == "adascale") & (t["status"] == "completed")]
    b = pd.to_numeric(g[COLUMN], errors="coerce")
    return g[b.notna()]


def task_value(t: pd.DataFrame) -> tuple[float, int]:
    """(the median training-average B_simple over the table's fixed-S AdaScale runs with S ≥ 2, how many
    runs): the task's noise scale, which decides what the findings can test. (NaN, 0) when none."""
    g = per_run(t)
    if g.empty:
        return math.nan, 0
    return float(np.median(pd.to_numeric(g[COLUMN]).to_numpy(float))), len(g)


def fmt(b: float) -> str:
    """B_simple as printed: a whole number of examples; ∞ when μ² was not above its noise."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "–"
    return "∞" if math.isinf(b) else f"{b:,.0f}"

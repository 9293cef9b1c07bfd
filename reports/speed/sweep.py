"""The critical-batch sweep's one table: epochs to the target loss per global batch and method, from the
run files of the sweep's runs (experiment kind `sweep`). `adascale-bench sweep`, the smoke's report and
the sweep figure all read this table, so they cannot disagree.

The rule: a (method, batch) point is the mean of its seeds' epochs to target, and counts as reached only
when every finished seed reached the target (a point half its seeds miss is not a reached point).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.algo.rules import ADASCALE
from reports.rundata import guards
from reports.rundata.collect import Results
from reports.speed.critical import COLUMNS as _CRITICAL_COLUMNS
from reports.speed.critical import NO_CRITICAL, describe, fit_series, measures

COLUMNS_FIT = [c for c in _CRITICAL_COLUMNS if c not in ("source", "task", "variant", "method")]

SWEEP_METHODS = {"fixed": "fixed lr", "linear": "linear scaling + warm-up", ADASCALE: "AdaScale"}
DEFAULT_EPOCH_CAP = 80.0
COLUMNS = ["task", "batch", "method", "epochs_to_target", "reached", "n_seeds"]


def _finite(s: pd.Series) -> np.ndarray:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    return v[np.isfinite(v)]


def sweep_points(g: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per (method, batch): epochs to target (mean over finished seeds) or not reached; and the epoch cap.
    A point counts as reached only when every finished seed reached the target."""
    cap_vals = _finite(g["max_epochs"])
    if not len(cap_vals):
        cap_vals = _finite(g["epochs"])
    reached_all = _finite(g["target_epochs"])
    cap = float(cap_vals.max()) if len(cap_vals) else DEFAULT_EPOCH_CAP
    cap = max(cap, float(reached_all.max()) if len(reached_all) else cap)
    fin = g[g["status"].isin(("completed", "diverged"))]
    rows = []
    for (method, batch), p in fin.groupby(["sweep_method", "sweep_batch"]):
        reached = _finite(p["target_epochs"])
        ok = len(reached) == len(p) and (p["status"] == "completed").all()
        rows.append(
            {
                "batch": int(batch) if float(batch).is_integer() else batch,
                "method": method,
                "epochs_to_target": float(reached.mean()) if ok else math.nan,
                "reached": ok,
                "n_seeds": len(p),
            }
        )
    return pd.DataFrame(rows, columns=["batch", "method", "epochs_to_target", "reached", "n_seeds"]), cap


def sweep_runs(res: Results) -> pd.DataFrame:
    df = res.runs
    if df.empty:
        return df
    df = df[df["experiment_kind"] == "sweep"].copy()
    if df.empty:
        return df
    # the sweep's method falls back to the run's own method; its batch to S·b
    df["sweep_method"] = df["sweep_method"].where(df["sweep_method"].notna(), df["method"])
    sb = pd.to_numeric(df["scale"], errors="coerce") * df["batch_size"].astype(float)
    df["sweep_batch"] = df["sweep_batch"].where(np.isfinite(df["sweep_batch"].astype(float)), sb)
    return df[np.isfinite(df["sweep_batch"].astype(float))]


def sweep_table(res: Results) -> pd.DataFrame:
    """batch, method, epochs_to_target (empty where not reached), reached, n_seeds, task."""
    df = sweep_runs(res)
    parts = []
    if not df.empty:
        for task, g in df.groupby("task"):
            pts, _ = sweep_points(g)
            parts.append(pts.assign(task=task))
    cols = COLUMNS
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts)[cols]
    order = out["method"].map(lambda m: list(SWEEP_METHODS).index(m) if m in SWEEP_METHODS else len(SWEEP_METHODS))
    return out.assign(_o=order).sort_values(["task", "_o", "method", "batch"]).drop(columns="_o")


def noise_scales(g: pd.DataFrame) -> np.ndarray:
    """The gradient-noise scales B_simple the sweep's AdaScale runs measured (McCandlish et al.'s proxy for a
    critical batch, not a measured one): each run's training average (reports.stats.noise), else — a run from
    before it was recorded and not filled — the moving averages' value at its end (summary.json
    `noise_scale`)."""
    ada = g[(g["sweep_method"] == ADASCALE) | (g["method"] == ADASCALE)]
    end = pd.to_numeric(ada["noise_scale"], errors="coerce")
    avg = pd.to_numeric(ada["B_simple"], errors="coerce") if "B_simple" in ada else end * math.nan
    return _finite(avg.where(np.isfinite(avg), end))


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """sweep.csv: task, batch, method, epochs_to_target (empty where not reached), reached, n_seeds."""
    from bench.core.files import atomic_write_bytes

    atomic_write_bytes(
        path,
        guards.csv_safe(table).to_csv(index=False, float_format="%.6g", na_rep="").encode(errors="backslashreplace"),
    )


def wide(table: pd.DataFrame) -> str:
    """The table as a person reads it: one row per batch, one column per method, – where not reached."""
    if table.empty:
        return "(no sweep runs)"
    w = table.pivot_table(index="batch", columns="method", values="epochs_to_target", aggfunc="mean", dropna=False)
    cols = [m for m in SWEEP_METHODS if m in w.columns] + [m for m in w.columns if m not in SWEEP_METHODS]
    return w.reindex(columns=cols).to_string(na_rep="–", float_format=lambda v: f"{v:.0f}")


# ------------------------------------------------------------------ the critical batch, fitted


FIT_COLUMNS = ["task", "method", *COLUMNS_FIT, "epoch_examples"]


def _window(res: Results | None, run_dir: str, steps: float) -> float:
    """Iterations between the run's last evaluation before `steps` and `steps` (its first evaluation that
    reached the target: it stops there), within which the target was crossed; NaN without the records."""
    if res is None or not math.isfinite(steps):
        return math.nan
    _, evals = res.metrics(run_dir)
    if evals.empty or "iteration" not in evals:
        return math.nan
    its = pd.to_numeric(evals["iteration"], errors="coerce").to_numpy(float)
    before = its[np.isfinite(its) & (its < steps)]
    return float(steps - (before.max() if len(before) else 0.0))


def steps_examples(g: pd.DataFrame, res: Results | None = None) -> pd.DataFrame:
    """Per finished run of one task's sweep: method, batch, seed, steps to target (its iterations: a run stops
    at its first evaluation that reaches the target; NaN where it did not), whether it reached it, and the
    window of iterations since the evaluation before (read from its records when `res` is given)."""
    fin = g[g["status"].isin(("completed", "diverged"))]
    reached = np.isfinite(fin["target_epochs"].astype(float)) & (fin["status"] == "completed")
    steps = pd.to_numeric(fin["iterations"], errors="coerce").where(reached)
    return pd.DataFrame(
        {
            "method": fin["sweep_method"],
            "batch": fin["sweep_batch"].astype(float),
            "seed": fin["seed"],
            "steps": steps,
            "reached": reached,
            "window": [_window(res, d, float(s)) for d, s in zip(fin["run_dir"], steps, strict=True)],
        }
    )


def fit_points(g: pd.DataFrame, task: str, res: Results | None = None) -> pd.DataFrame:
    """FIT_COLUMNS for one task's sweep runs `g`: one row per sweep method with ≥ 3 batches that every seed
    reached (reports.speed.critical.fit_series: the fit, its bootstrap interval over seeds and evaluation windows
    — read from the runs' records when `res` is given —, degenerate or not)."""
    done = g[(g["status"] == "completed") & (pd.to_numeric(g["epochs"], errors="coerce") > 0)]
    per_epoch = done["iterations"].astype(float) * done["sweep_batch"].astype(float) / done["epochs"].astype(float)
    epoch_examples = float(per_epoch.median()) if len(per_epoch) else math.nan  # N, to draw E in epochs
    targets = _finite(g["sweep_target"]) if "sweep_target" in g else np.array([])
    target = float(targets[0]) if len(targets) and (targets == targets[0]).all() else math.nan
    rows = []
    for method, p in steps_examples(g, res).groupby("method"):
        fit = fit_series(p)
        if fit is not None:
            what = measures("sweep", str(method))
            rows.append({"task": task, "method": method, **fit, "epoch_examples": epoch_examples})
            rows[-1] |= {"target": target, "measures": what, "agrees": ""}
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def critical_batches(res: Results) -> pd.DataFrame:
    """B_crit = E_min / S_min per task and sweep method with ≥ 3 reached batches (FIT_COLUMNS)."""
    df = sweep_runs(res)
    parts = [fit_points(g, task, res) for task, g in df.groupby("task")] if not df.empty else []
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=FIT_COLUMNS)


def noise_by_task(res: Results) -> dict[str, np.ndarray]:
    """The noise scales the sweep's AdaScale runs recorded, per task."""
    df = sweep_runs(res)
    return {task: noise_scales(g) for task, g in df.groupby("task")} if not df.empty else {}


def b_simple_note(b: np.ndarray) -> str:
    """The AdaScale runs' training-average B_simple, said for what it is: McCandlish et al.'s proxy for the
    critical batch at a tuned lr (which no series here runs), an average no verdict uses."""
    if not len(b):
        return ""
    return (
        f"training-average B_simple (median of {len(b)} AdaScale runs) = {np.median(b):,.0f}: McCandlish et al.'s "
        "proxy for a critical batch at a tuned lr, not a measured one; no verdict uses it"
    )


def critical_text(fits: pd.DataFrame, noise: dict[str, np.ndarray] | None = None) -> str:
    """One line per fit: what its B_crit is (reports.speed.critical.measures), the value with its intervals (or its
    degenerate bound), S_min, E_min, rms, whether it agrees with another source's fit of the same series;
    then each task's B_simple note and the line that no critical batch was measured."""
    if fits.empty:
        return "critical batch: no sweep method with 3 reached points to fit\n" + NO_CRITICAL
    lines = []
    for r in fits.itertuples():
        agrees = getattr(r, "agrees", "")
        agrees = f"; DISAGREES with {agrees[4:]}" if str(agrees).startswith("no") else ""
        lines.append(
            f"trade-off fit {r.task} [{SWEEP_METHODS.get(r.method, r.method)}]: {describe(r)} (S_min = "
            f"{r.S_min:,.1f} steps, E_min = {r.E_min:,.0f} examples, {r.n_points} points, rms log-residual "
            f"{r.rms_log:.2f}) — {r.measures}{agrees}"
        )
    lines += [f"{task}: {b_simple_note(b)}" for task, b in (noise or {}).items() if len(b)]
    return "\n".join([*lines, NO_CRITICAL])

"""Time to target, for any results folder: per run (`time_to_target`), per cell with its speed-up over S = 1
and the range and status its evaluation windows allow (`ttt_summary`), and its HTML table (`ttt_html`).

- Time to target (AlgoPerf's measure): per run, the first evaluation whose metric reaches the threshold fixed
  before the runs (spec `ttt_target`: the task preset's, whose comment says where it comes from — the paper's
  S = 1 value or a previous round's S = 1 runs, less a margin — or a matrix's for a variant; never the current
  runs' mean), with its iterations and examples (Σ_t S_t·b up to it), the primary measure, the resolution
  (iterations since the evaluation before it) and the run's wall seconds, a time only where the run computed
  its S micro-batches in parallel (`parallel`); "not reached" where none does. Per cell, the fraction of
  seeds that reached it and medians with misses counted as never.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from bench.core.methods import title
from reports.rundata.collect import Results
from reports.stats import numbers as N
from reports.tables.table2 import table_runs

NOT_REACHED = "not reached"
SIMULATED = "simulated"
TTT_COLUMNS = ["task", "variant", "scale", "method", "seed", "batch", "target", "reached", "iterations", "resolution"]
TTT_COLUMNS += ["examples", "seconds", "parallel"]


def _micro_batches(train: pd.DataFrame, iteration: int) -> float:
    """Σ S_k over k < iteration from the training records (S_k: the latest record's at or before k, the first
    record's before it: exact where the records are complete, to within the sampling step where the report sampled
    them), a segment per record: what it costs is the records, not the iteration (an evaluation record's iteration
    of 10^15 would have been an array of 10^15 entries)."""
    if train.empty or not {"iteration", "scale"} <= set(train.columns):
        return 0.0
    d = train[["iteration", "scale"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    if d.empty:
        return 0.0
    firsts = np.clip(np.ceil(d["iteration"].to_numpy(float)), 0, iteration)  # the first k each record stands for
    starts = np.concatenate([[0.0], firsts[1:]])
    ends = np.concatenate([firsts[1:], [float(iteration)]])
    return float(np.sum(np.maximum(ends - starts, 0) * d["scale"].to_numpy(float)))


def parallel(r: object) -> bool:
    """Whether a run really computed its S micro-batches side by side: one micro-batch per rank (W = S at a
    fixed S, or accumulation A = 1), so its wall seconds are a time; else they are simulated scale (S
    micro-batches one after another on W < S ranks) and no time to compare."""
    acc, ranks = getattr(r, "accumulation", math.nan), getattr(r, "ranks", math.nan)
    if acc == 1:
        return True
    scale = pd.to_numeric(pd.Series([getattr(r, "scale", None)]), errors="coerce").iloc[0]
    return bool(np.isfinite(scale) and ranks == scale and not (acc > 1))


def _first_hit(evals: pd.DataFrame, target: float, higher: bool) -> tuple[pd.Series, float] | None:
    """(the first evaluation record whose metric reaches `target`, the iterations since the evaluation before
    it: where in between the target was crossed is unknown) or None."""
    if evals.empty or not {"metric", "iteration"} <= set(evals.columns):
        return None
    m = pd.to_numeric(evals["metric"], errors="coerce").to_numpy(float)
    its = pd.to_numeric(evals["iteration"], errors="coerce").to_numpy(float)
    with np.errstate(invalid="ignore"):  # a record without a finite iteration (damaged: NaN) reaches nothing
        hit = np.flatnonzero(((m >= target) if higher else (m <= target)) & np.isfinite(its) & np.isfinite(m))
    if not len(hit):
        return None
    before = its[hit[0] - 1] if hit[0] > 0 else 0.0
    return evals.iloc[hit[0]], float(its[hit[0]] - before)


def time_to_target(res: Results) -> pd.DataFrame:
    """TTT_COLUMNS per Table 2 run (and per method at the shared S = 1 run) whose spec fixes a `ttt_target`
    (set before the run by its preset or matrix; runs without one are not counted)."""
    t = table_runs(res.runs)
    rows: list[dict] = []
    if t.empty or "ttt_target" not in t:
        return pd.DataFrame(columns=TTT_COLUMNS)
    t = t[np.isfinite(pd.to_numeric(t["ttt_target"], errors="coerce")) & t["status"].isin(("completed", "diverged"))]
    for r in t.itertuples():
        higher = bool(r.higher_is_better) if isinstance(r.higher_is_better, bool) else True
        train, evals = res.metrics(r.run_dir) if r.has_metrics else (pd.DataFrame(), pd.DataFrame())
        scale = pd.to_numeric(pd.Series([r.scale]), errors="coerce").iloc[0]
        row = {"task": r.task, "variant": r.variant, "scale": r.scale, "method": r.method, "seed": r.seed}
        row |= {"batch": scale * float(r.batch_size), "target": float(r.ttt_target), "reached": False}
        row |= dict.fromkeys(("iterations", "examples", "resolution", "seconds"), math.nan)
        row["parallel"] = parallel(r)
        hit = _first_hit(evals, float(r.ttt_target), higher)
        if hit is not None:
            first, resolution = hit
            it = int(first["iteration"])
            row |= {"reached": True, "iterations": it, "resolution": resolution}
            row["examples"] = _micro_batches(train, it) * float(r.batch_size) if it else 0.0
            row["seconds"] = float(first["wall_time_s"]) if "wall_time_s" in first else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=TTT_COLUMNS)


def _median_with_misses(values: pd.Series, reached: pd.Series) -> float:
    """The median over every seed with a miss counted as never (inf): finite only when more than half
    the seeds reached."""
    v = np.where(reached.astype(bool).to_numpy(), pd.to_numeric(values, errors="coerce").to_numpy(float), math.inf)
    return float(np.median(v)) if len(v) else math.nan


RESOLVED, UNRESOLVED = "resolved", "unresolved"
# Issue #39's bound, fixed before looking at any speed-up: a speed-up whose evaluation windows allow values
# spread over more than a quarter of it cannot tell a scale's ideal S from 0.8·S (efficiency 1 from 0.8).
RESOLUTION_LIMIT = 0.25


def speedup_bounds(base: tuple[float, float], cell: tuple[float, float]) -> tuple[float, float]:
    """The speed-up's range that the evaluation windows allow: a cell's median crossing lies in [median of
    (iterations − resolution), median of iterations] (each run crossed within its window; the median is
    monotone), so base/cell lies in [base_lo/cell_hi, base_hi/cell_lo] (inf where cell_lo is 0)."""
    (b_lo, b_hi), (c_lo, c_hi) = base, cell
    lo = b_lo / c_hi if 0 < c_hi < math.inf else math.nan
    if not math.isfinite(lo):  # no lower bound, no range (and no inf / inf: a cell that never crossed)
        return lo, math.nan
    return lo, b_hi / c_lo if c_lo > 0 else math.inf


def speedup_status(point: float, lo: float, hi: float, scale: object) -> str:
    """`resolved`, or `unresolved` with why: above S (AdaScale's τ advances by its gain r ≤ S an iteration and
    the other rules' by S, so more than S in iterations is the evaluation grid's artefact, e.g. S = 1
    evaluated every 500 iterations), or windows that allow a range over RESOLUTION_LIMIT of the value; ''
    where there is no speed-up (not reached, or no S = 1 cell)."""
    if not (0 < point < math.inf):
        return ""
    s = pd.to_numeric(pd.Series([scale]), errors="coerce").iloc[0]
    if np.isfinite(s) and point > s:
        return f"{UNRESOLVED}: above S = {s:g}"
    if not math.isfinite(hi - lo):  # the cell's window reaches back to iteration 0, or a bound is unknown
        return f"{UNRESOLVED}: the windows leave it unbounded"
    if hi - lo > RESOLUTION_LIMIT * point:
        return f"{UNRESOLVED}: the windows allow {(hi - lo) / point:.0%} of it (over {RESOLUTION_LIMIT:.0%})"
    return RESOLVED


def _cell_speedups(out: pd.DataFrame) -> pd.DataFrame:
    """speedup (S = 1's median iterations over this cell's), its window bounds and status, per cell of
    `out` (its `iterations` and `iterations_lo`: medians with misses of the first evaluation that reached
    and of the one before it). S = 1's own row is 1 exactly: the same runs on both sides of the ratio."""
    key = ["task", "variant", "method"]
    base = out[out["scale"].astype(str) == "1"].set_index(key)[["iterations", "iterations_lo"]]
    sp, lo, hi, status = [], [], [], []
    for r in out.itertuples():
        k = (r.task, r.variant, r.method)
        b = (base.at[k, "iterations_lo"], base.at[k, "iterations"]) if k in base.index else (math.nan, math.nan)
        point = b[1] / r.iterations if 0 < r.iterations < math.inf else math.nan
        bounds = (1.0, 1.0) if str(r.scale) == "1" else speedup_bounds(b, (r.iterations_lo, r.iterations))
        sp.append(point)
        lo.append(bounds[0] if math.isfinite(point) else math.nan)
        hi.append(bounds[1] if math.isfinite(point) else math.nan)
        status.append(speedup_status(point, *bounds, r.scale))
    return out.assign(speedup=sp, speedup_lo=lo, speedup_hi=hi, speedup_status=status)


TTT_SUMMARY_COLUMNS = ["task", "variant", "scale", "method", "target", "reached", "fraction", "iterations"]
TTT_SUMMARY_COLUMNS += ["resolution", "examples", "speedup", "speedup_lo", "speedup_hi", "speedup_status", "seconds"]


def ttt_summary(ttt: pd.DataFrame) -> pd.DataFrame:
    """Per task, variant, S and method: seeds that reached the target (k/n and the fraction), the median
    iterations, examples and seconds with misses as not reached ("not reached" where half or more missed),
    the largest resolution (iterations between the evaluation that reached and the one before), the
    speed-up in iterations over S = 1 of the same method with the range its windows allow and its status
    (`speedup_status`), and seconds only where every run computed its S in parallel ("simulated" otherwise:
    S micro-batches in sequence are no time to compare)."""
    cols = TTT_SUMMARY_COLUMNS
    if ttt.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (task, variant, scale, method), g in ttt.groupby(["task", "variant", "scale", "method"], sort=False):
        ok = g["reached"].astype(bool)
        row = {"task": task, "variant": variant, "scale": scale, "method": method, "target": g["target"].iloc[0]}
        row |= {"reached": f"{int(ok.sum())}/{len(g)}", "fraction": float(ok.mean())}
        for k in ("iterations", "examples", "seconds"):
            row[k] = _median_with_misses(g[k], ok)
        before = pd.to_numeric(g["iterations"], errors="coerce") - pd.to_numeric(g["resolution"], errors="coerce")
        row["iterations_lo"] = _median_with_misses(before.clip(lower=0), ok)
        row["resolution"] = float(g.loc[ok, "resolution"].max()) if ok.any() else math.nan
        if not g["parallel"].astype(bool).all():
            row["seconds"] = SIMULATED
        rows.append(row)
    out = _cell_speedups(pd.DataFrame(rows))
    for k in ("iterations", "examples", "speedup"):
        out[k] = out[k].astype(object).where(np.isfinite(out[k].astype(float)), NOT_REACHED)
    order = out["scale"].map(lambda s: float(s) if str(s).replace(".", "").isdigit() else math.inf)
    return out.assign(_o=order).sort_values(["task", "variant", "_o", "method"]).drop(columns="_o")[cols]


def speedup_text(r: Any) -> str:
    """A summary row's speed-up as a reader may take it: the number where resolved, else 'unresolved
    (3.1×–12×)' with the range its windows allow, never a plain number."""
    if isinstance(r.speedup, str):
        return r.speedup
    if not str(r.speedup_status).startswith(UNRESOLVED):
        return N.speedup(float(r.speedup))
    hi = "∞" if r.speedup_hi == math.inf else format(r.speedup_hi, ".2g")
    return f"unresolved ({r.speedup_lo:.2g}×–{hi}×)"


# ------------------------------------------------------------------------------------------- HTML


def _cell(v: object, fmt: str) -> str:
    return v if isinstance(v, str) else "–" if not np.isfinite(float(v)) else format(float(v), fmt)


def ttt_html(summary: pd.DataFrame, variants: dict[str, str] | None = None) -> str:
    """The time-to-target table: one row per task, variant (by its short name), S and method."""
    import html

    if summary.empty:
        return '<p class="note">No Table 2 runs with a time-to-target threshold (spec ttt_target) set before them.</p>'
    out = [
        "<table><tr><th>task</th><th>target</th><th>S</th><th>method</th><th>seeds reached</th><th>iterations</th>"
        "<th>± resolution</th><th>examples</th><th>speed-up to the target<br><small>(iterations; not the "
        "budget's speed-up of the rules)</small></th><th>seconds</th></tr>"
    ]
    for r in summary.itertuples():
        name = f"{r.task}{f' [{(variants or {}).get(r.variant, r.variant)}]' if r.variant else ''}"
        cells = [name, f"{r.target:g}", str(r.scale), title(str(r.method)), r.reached]
        cells += [_cell(r.iterations, ",.0f"), _cell(r.resolution, ",.0f"), _cell(r.examples, ",.0f")]
        why = str(r.speedup_status).partition(": ")[2]
        cells += [speedup_text(r) + (f": {why}" if why else ""), _cell(r.seconds, ",.1f")]
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    legend = (
        "Time to target (AlgoPerf): per run, the first evaluation whose metric reaches the threshold fixed before "
        "the runs (spec ttt_target: the task preset's, which says where it comes from — the paper's S = 1 value or "
        "a previous round's S = 1 runs, less a margin — or the matrix's for a variant; never these runs' own mean). "
        "Iterations and examples (Σ S_t·b) are the measure; medians over every seed with a miss counted as never "
        "(not reached where half or more missed); ± resolution: iterations since the evaluation before, within "
        "which the target was crossed. Speed-up: S = 1's median iterations over this one's; 'unresolved' with the "
        "range the windows allow (S = 1's median crossing over this one's, each anywhere in its window) where that "
        "range spans more than a quarter of the value or the value exceeds S (more than S in iterations is the "
        "evaluation grid's, not the rule's): not a number to compare (time_to_target_cells.csv: speedup_status). "
        "Seconds only where "
        "every run computed its S micro-batches in parallel (W = S ranks, or accumulation 1); otherwise "
        "'simulated': S micro-batches one after another are not a time to compare. Per run: time_to_target.csv."
    )
    out.append(f'<p class="legend">{html.escape(legend)}</p>')
    return "\n".join(out)

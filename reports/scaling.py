"""How a results folder's runs scale with S, for any folder (the positive control, bench/experiments/matrices/
control.yaml, is read with it): speed-ups against S beside the paper's, AdaScale's speed-up against S·b /
B_simple, time to target and B_crit.

- Speed-up = T1 / iterations (a fixed-S run; mean over its completed seeds), per table (task, preset,
  variant), Table 2 rule (every rule with runs: a rule whose pace is the scale, LSW, √S, LEGW, has S by
  construction) and S, beside the ideal S and the paper's own speed-up of the same task and method (its
  S = 1 iterations over its iterations at S, paper/table2.csv).
- AdaScale's efficiency (speed-up ÷ S) beside what finding (iii) predicts for the same run: T1 over the
  iterations of a gain that follows the noise the table's other runs measured (reports.noise.predict, through
  bench.algo.predict: the estimator's moving average and steady gain) — one formula for the panel and the
  finding;
  S·b/B with B the run's late noise scale (reports.noise: per window, τ-weighted, corrected for drawing
  without replacement).
- Time to target (AlgoPerf's measure): per run, the first evaluation whose metric reaches the threshold fixed
  before the runs (spec `ttt_target`: the task preset's, whose comment says where it comes from — the paper's
  S = 1 value or a previous round's S = 1 runs, less a margin — or a matrix's for a variant; never the current
  runs' mean), with its iterations and examples (Σ_t S_t·b up to it), the primary measure, the resolution
  (iterations since the evaluation before it) and the run's wall seconds, a time only where the run computed
  its S micro-batches in parallel (`parallel`); "not reached" where none does. Per cell, the fraction of
  seeds that reached it and medians with misses counted as never.
- B_crit of the Table 2 cells: steps to target (time-to-target iterations) against S·b, per table and method
  with ≥ 3 fixed S that every seed reached, fitted with a bootstrap interval over seeds (reports.critical).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.algo.rules import ADASCALE, LSW_PLUS, title

from . import guards, noise
from .collect import Results, rule_rows
from .noninferiority import table_margin
from .paper import load_paper
from .scalefree import WORSE_FLAG
from .table2 import place, table_runs

NOT_REACHED = "not reached"
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
SIMULATED = "simulated"
TTT_COLUMNS = ["task", "variant", "scale", "method", "seed", "batch", "target", "reached", "iterations", "resolution"]
TTT_COLUMNS += ["examples", "seconds", "parallel"]
SPEEDUP_COLUMNS = ["task", "variant", "method", "scale", "speedup", "n", "ideal", "paper", "S_b_over_B", "predicted"]
SPEEDUP_COLUMNS += ["quality"]


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    s = pd.to_numeric(df["scale"], errors="coerce")
    return df.assign(S=s)[np.isfinite(s)]


def noise_scales(res: Results) -> pd.DataFrame:
    """The Table 2 AdaScale runs (S ≥ 2, completed) with their noise scale per window (reports.noise.fill),
    `B_late` as `B`, and `predicted`: the speed-up finding (iii) predicts, T1 / predicted iterations."""
    noise.fill(res)
    t = table_runs(res.runs)
    if t.empty:
        return t.assign(B=pd.Series(dtype=float), predicted=pd.Series(dtype=float))
    t = _fixed(t)
    ada = t[(t["method"] == ADASCALE) & (t["S"] >= 2) & (t["status"] == "completed")].copy()
    ada["B"] = pd.to_numeric(ada[noise.WINDOW_COLUMNS[-1]], errors="coerce")
    ada["predicted"] = ada["T1"].astype(float) / pd.to_numeric(ada[noise.PREDICTED], errors="coerce")
    return ada


def _paper_speedups() -> dict[tuple[str, str, float], float]:
    p = load_paper()
    p = p[pd.to_numeric(p["scale"], errors="coerce").notna() & p["iterations"].notna()]
    out = {}
    for (task, method), g in p.groupby(["task", "method"]):
        base = g.loc[g["scale"] == "1", "iterations"]
        for r in g.itertuples():
            if len(base):
                out[(task, method, float(r.scale))] = float(base.iloc[0]) / float(r.iterations)
    return out


def speedups(res: Results, noise: pd.DataFrame | None = None) -> pd.DataFrame:
    """SPEEDUP_COLUMNS per table, Table 2 rule and fixed S; S_b_over_B and `predicted` (finding (iii)'s
    speed-up) from AdaScale's runs; `quality`: the scale-free table's flag (a mean metric worse than S = 1's
    by more than the findings' margin: no success, whatever its speed-up)."""
    t = table_runs(res.runs)
    if t.empty:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    t = _fixed(t)
    margins = _margins(t)
    t = t[t["status"] == "completed"]
    noise = noise_scales(res) if noise is None else noise
    paper = _paper_speedups()
    rows = []
    for (task, variant, method, S), g in t.groupby(["task", "variant", "method", "S"]):
        sp = (g["T1"].astype(float) / g["iterations"].astype(float)).to_numpy()
        same = noise[(noise["task"] == task) & (noise["variant"] == variant) & (noise["S"] == S)]
        nb, pred = same["B"].dropna(), same["predicted"].dropna()
        b = float(g["batch_size"].iloc[0])
        median = float(np.median(nb.dropna())) if len(nb.dropna()) else math.nan
        ratio = S * b / median if median > 0 else math.nan  # a noise scale of 0 (μ² never above its noise): none
        delta, base, higher = margins.get((task, variant), (math.nan, math.nan, True))
        d = (1 if higher else -1) * (float(pd.to_numeric(g["val_metric"], errors="coerce").mean()) - base)
        rows.append(
            {
                "task": task,
                "variant": variant,
                "method": method,
                "scale": S,
                "speedup": float(np.mean(sp)),
                "n": len(sp),
                "ideal": S,
                "paper": paper.get((task, method, S), math.nan),
                "S_b_over_B": ratio,
                "predicted": float(np.mean(pred)) if method == ADASCALE and len(pred) else math.nan,
                "quality": WORSE_FLAG if d < -delta else "",
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


def _scales(train: pd.DataFrame, iteration: int) -> np.ndarray:
    """S_k for k < iteration from the training records (the latest record at or before k: exact where the
    records are complete, to within the sampling step where the report sampled them)."""
    if train.empty or not {"iteration", "scale"} <= set(train.columns):
        return np.array([])
    d = train[["iteration", "scale"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    if d.empty:
        return np.array([])
    idx = np.clip(np.searchsorted(d["iteration"].to_numpy(float), np.arange(iteration), side="right") - 1, 0, None)
    return d["scale"].to_numpy(float)[idx]


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
    m = pd.to_numeric(evals["metric"], errors="coerce")
    hit = np.flatnonzero(((m >= target) if higher else (m <= target)).to_numpy())
    if not len(hit):
        return None
    its = pd.to_numeric(evals["iteration"], errors="coerce").to_numpy(float)
    before = its[hit[0] - 1] if hit[0] > 0 else 0.0
    return evals.iloc[hit[0]], float(its[hit[0]] - before)


def _margins(t: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, bool]]:
    """(Δ, S = 1 mean, higher is better) per (task, variant), from the S = 1 runs
    (reports.noninferiority.table_margin)."""
    out = {}
    for (task, variant), g in t.groupby(["task", "variant"]):
        base = g[(g["S"] == 1) & (g["status"] == "completed")].drop_duplicates("run_dir")
        vals = pd.to_numeric(base["val_metric"], errors="coerce").dropna().to_numpy(float)
        higher = bool(g["higher_is_better"].dropna().iloc[0]) if g["higher_is_better"].notna().any() else True
        preset = str(g["preset"].iloc[0] or "")
        m = table_margin(str(task), preset, higher, vals)
        out[(task, variant)] = (m.delta, float(np.mean(vals)) if len(vals) else math.nan, higher)
    return out


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
            row["examples"] = float(np.sum(_scales(train, it))) * float(r.batch_size) if it else 0.0
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
    hi = b_hi / c_lo if c_lo > 0 else math.inf
    return lo, hi if math.isfinite(lo) else math.nan


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
    if isinstance(r.speedup, str) or not str(r.speedup_status).startswith(UNRESOLVED):
        return _cell(r.speedup, ".2f")
    hi = "∞" if r.speedup_hi == math.inf else format(r.speedup_hi, ".2g")
    return f"unresolved ({r.speedup_lo:.2g}×–{hi}×)"


def flags_text(fits: pd.DataFrame, summary: pd.DataFrame) -> str:
    """What `report` prints after the rules: each B_crit fit that disagrees with the other source's fit of
    the same series, and each time-to-target speed-up that is unresolved, one line each ('' when none)."""
    lines = []
    for r in fits.itertuples() if not fits.empty else ():
        if isinstance(r.agrees, str) and r.agrees.startswith("no"):
            what = f"{r.task}{f' [{r.variant}]' if r.variant else ''} {r.method}, {r.source}"
            value = f"{r.B_crit:,.0f} [{r.B_crit_lo:,.0f}, {r.B_crit_hi:,.0f}]"
            lines.append(f"B_crit {what} {value} DISAGREES with {r.agrees[4:]}")
    for r in summary.itertuples() if not summary.empty else ():
        if str(r.speedup_status).startswith(UNRESOLVED):
            what = f"{r.task}{f' [{r.variant}]' if r.variant else ''} S = {r.scale} {r.method}"
            why = str(r.speedup_status).partition(": ")[2]
            lines.append(f"time to target {what}: speed-up {speedup_text(r)}, {why}")
    return "".join(f"{line}\n" for line in lines)


def critical_table(res: Results, ttt: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every B_crit fit of the results (reports.critical COLUMNS): the sweep's, then Table 2's, each with
    whether it agrees with the other source's fit of the same task, variant, method and target."""
    from .critical import COLUMNS, agreement
    from .sweep import critical_batches

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
    from bench.files import atomic_write_bytes

    from .critical import write_csv as write_critical

    ttt = time_to_target(res) if ttt is None else ttt
    for name, table in (
        ("time_to_target.csv", ttt),
        ("time_to_target_cells.csv", ttt_summary(ttt)),
        ("speedup.csv", speedups(res)),
    ):  # no cell a formula (reports.guards)
        text = guards.csv_safe(table).to_csv(index=False, float_format="%.6g")
        atomic_write_bytes(dest / name, text.encode(errors="backslashreplace"))
    write_critical(critical_table(res, ttt) if fits is None else fits, dest / "b_crit.csv")


# ----------------------------------------------------------------------------------------- figures

SPEEDUP_CAPTION = (
    "Left: speed-up T1/iterations against S (mean over seeds) for every Table 2 rule with runs (LSW+ runs "
    "AdaScale's iterations; a rule whose τ advances by S, LSW, √S, LEGW, lies on the ideal line by "
    "construction; where rules coincide (within 3 % at some S), the later ones in the method table are drawn wide "
    "and pale beneath, "
    "so LSW+ is drawn wide and pale under AdaScale), the ideal line (speed-up = S) "
    "and the paper's own speed-ups (paper/table2.csv: its S = 1 "
    "iterations over its iterations at S), dashed: the same task's rules in their colour, AdaScale of the "
    "other paper tasks in grey; a red ✗ marks a cell whose metric misses S = 1's by more than the findings' "
    "margin (no success, whatever its speed-up). Right: AdaScale's scaling "
    "efficiency (speed-up ÷ S) against S, beside what finding (iii) predicts for the same runs: T1 over the "
    "iterations of a gain at the steady value S(B/b + 1)/(B/b + S) of the noise the other runs measured, per tenth of "
    "τ through the estimator's moving average (one formula for the panel and the finding); each point labelled "
    "with S·b/B, B its late noise scale. "
    "Past the noise scale a larger batch buys fewer steps."
)


def _floats(values) -> list[float]:
    return [float(v) for v in values]


COINCIDE = 0.03  # relative difference of two rules' speed-ups at one S under which their points overlap


def _covered(m: pd.DataFrame, above: pd.DataFrame) -> bool:
    """Whether a rule's speed-ups `m` coincide at some S > 1 with those of a rule drawn over it (`above`)."""
    for r in m[m["scale"].astype(float) != 1].itertuples():  # at S = 1 every rule is at 1: no overlap to avoid
        other = above[above["scale"] == r.scale]["speedup"].astype(float)
        if math.isfinite(r.speedup) and len(other) and (abs(other - r.speedup) <= COINCIDE * abs(r.speedup)).any():
            return True
    return False


def speedup_plan(g: pd.DataFrame, paper: pd.DataFrame, task: str, name: str, rows: dict, colors: dict) -> dict:
    """What one speed-up figure shows, as plain data (reports.figures.render draws it, or keeps the PNG drawn
    from the same plan). Rules that coincide (LSW+ on AdaScale, √S on LSW) stay visible: the later ones in
    the method table are drawn first, wide and pale where they coincide with a rule drawn over them (within 3 %
    at some S), AdaScale last, narrow, on top; a rule that coincides with none is drawn as plainly as AdaScale."""
    mine = sorted(set(g["method"]), key=place)
    lines, other = [], True
    for (ptask, method), p in paper.groupby(["task", "method"]):
        base = p.loc[p["scale"] == "1", "iterations"]
        same = ptask == task and method in mine
        if not len(base) or not (same or (ptask != task and method == ADASCALE)):
            continue
        label = f"paper {rows[method].title if method in rows else method}, {ptask}" if same else None
        if not same and other:
            label, other = "paper AdaScale, the other tasks", False
        wide = same and method == LSW_PLUS  # LSW+ runs AdaScale's iterations: drawn wide, AdaScale on top
        style = {"lw": 3.5 if wide else 1, "alpha": 0.5 if wide else 1, "zorder": 1 if wide else 2}
        color = colors[method] if same else "0.75"
        lines.append((label, color, _floats(p["scale"]), _floats(float(base.iloc[0]) / p["iterations"]), style))
    methods = []
    drawn = mine[::-1]
    for j, method in enumerate(drawn):
        m = g[g["method"] == method].sort_values("scale")
        hidden = _covered(m, g[g["method"].isin(drawn[j + 1 :])])  # under a rule drawn later: wide and pale
        width = 1.5 + 4.5 * (len(drawn) - 1 - j) / max(1, len(drawn) - 1) if hidden else 1.5
        style = {"marker": MARKERS[mine.index(method) % len(MARKERS)], "ms": 3 + 2 * width, "lw": width}
        style |= {"alpha": 0.45 if hidden else 1.0, "zorder": 3 + j}
        bad = (m["quality"].fillna("") != "").to_list()
        methods.append((rows[method].title, colors[method], _floats(m["scale"]), _floats(m["speedup"]), bad, style))
    ada = g[g["method"] == ADASCALE].sort_values("scale")
    eff = {
        "scale": _floats(ada["scale"]),
        "eff": _floats(ada["speedup"] / ada["scale"]),
        "bad": (ada["quality"].fillna("") != "").to_list(),
        "predicted": _floats(ada["predicted"].astype(float) / ada["scale"]),
        "ratio": _floats(ada["S_b_over_B"]),
    }
    return {"name": name, "paper": lines, "ideal": _floats(sorted(g["scale"].unique())), "methods": methods, "eff": eff}


def _draw_speedup(plan: dict, path: Path) -> None:
    """Left: speed-up against S; right: AdaScale's efficiency beside finding (iii)'s prediction."""
    import matplotlib.pyplot as plt

    from . import figures as F

    with plt.rc_context(F.STYLE):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.4), constrained_layout=True)
        for label, color, x, y, style in plan["paper"]:
            ax.plot(x, y, color=color, ls="--", marker=".", label=label, **style)
        ax.plot(plan["ideal"], plan["ideal"], color="black", lw=1, label="ideal (= S)")
        for label, color, x, y, bad, style in plan["methods"]:
            ax.plot(x, [math.nan if b else v for v, b in zip(y, bad, strict=True)], color=color, label=label, **style)
            flagged = [(xi, yi) for xi, yi, b in zip(x, y, bad, strict=True) if b]
            if flagged:
                ax.scatter(*zip(*flagged, strict=True), marker="x", s=80, color="tab:red", zorder=9)
        ax.set(xscale="log", yscale="log", xlabel="scale S", ylabel="speed-up T1 / iterations")
        ax.set_title(f"{plan['name']}: speed-up")
        ax.legend(fontsize=11)
        _draw_efficiency(bx, plan["eff"])
        F._save(fig, path)


def _draw_efficiency(bx, e: dict) -> None:
    """AdaScale's efficiency (speed-up ÷ S) against S, beside finding (iii)'s prediction; flagged cells ✗."""
    if e["scale"]:
        good = [not b for b in e["bad"]]
        pick = lambda xs, keep: [v for v, k in zip(xs, keep, strict=True) if k]  # noqa: E731
        bx.scatter(pick(e["scale"], good), pick(e["eff"], good), s=60, color="tab:blue", zorder=3, label="AdaScale")
        if not all(good):
            bad = [not k for k in good]
            bx.scatter(pick(e["scale"], bad), pick(e["eff"], bad), marker="x", s=80, color="tab:red", zorder=4)
        if any(math.isfinite(v) for v in e["predicted"]):
            bx.plot(e["scale"], e["predicted"], color="black", ls=":", marker="o", mfc="none", label="predicted (iii)")
        for x, y, ratio in zip(e["scale"], e["eff"], e["ratio"], strict=True):
            if math.isfinite(ratio):
                bx.annotate(  # below and right of its marker, clear of the line through it
                    f"S·b/B {ratio:.2g}", (x, y), textcoords="offset points", xytext=(8, -14), fontsize=11
                )
        bx.set(xscale="log", xlabel="scale S", ylabel="efficiency: speed-up ÷ S", ylim=(0, 1.05))
        _plain_s_ticks(bx, e["scale"])
        bx.legend(fontsize=11)
    bx.set_title("AdaScale's efficiency against S (labels: S·b/B, B the late noise scale)")


def _plain_s_ticks(ax, scales: list[float]) -> None:
    """S's own values as ticks (4, 64), not a log axis' 2×10⁰ minor labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ticks = sorted({float(v) for v in scales if math.isfinite(v) and v > 0})
    if ticks:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())


def speedup_figures(res: Results, outdir: Path) -> list:
    """One figure per table (task, variant) with AdaScale or LSW+ runs at a fixed S."""
    from . import figures as F

    sp = speedups(res)
    figs: list = []
    if sp.empty:
        return figs
    rows = rule_rows(res.runs)
    paper = load_paper()
    paper = paper[pd.to_numeric(paper["scale"], errors="coerce").notna()]
    import matplotlib.pyplot as plt

    order = sorted(set(sp["method"]) | {ADASCALE}, key=place)
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(order)}
    for (task, variant), g in sp.groupby(["task", "variant"]):
        path = outdir / f"speedup_{F._slug(task, res.variants.get(variant, variant))}.png"
        name = f"{task}{f' [{res.variants.get(variant, variant)}]' if variant else ''}"
        plan = speedup_plan(g, paper, task, name, rows, colors)
        F.render.current().submit(_draw_speedup, plan, path, caption=SPEEDUP_CAPTION)
        figs.append(F.Figure("speedup", name, path, SPEEDUP_CAPTION, variant))
    return figs


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
        "<th>± resolution</th><th>examples</th><th>speed-up vs S = 1</th><th>seconds</th></tr>"
    ]
    for r in summary.itertuples():
        name = f"{r.task}{f' [{(variants or {}).get(r.variant, r.variant)}]' if r.variant else ''}"
        cells = [name, f"{r.target:g}", str(r.scale), str(r.method), r.reached]
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


def table2_critical(ttt: pd.DataFrame) -> pd.DataFrame:
    """B_crit (reports.critical COLUMNS) of every table and method with ≥ 3 fixed scales whose seeds all
    reached the target: steps to target = time-to-target iterations, batch = S·b."""
    from .critical import COLUMNS, fit_series, measures

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
    measured (nothing without fits). A variant by its short name (reports.variants)."""
    import html

    from .critical import NO_CRITICAL, describe
    from .sweep import SWEEP_METHODS, b_simple_note

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


KINDS = {
    "speedup": (
        speedup_figures,
        "speed-up against S and against the noise scale",
        "no completed Table 2 runs at a fixed S",
    ),
}

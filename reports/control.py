"""What the positive control (bench/experiments/matrices/control.yaml) is read with, for any results folder:
speed-ups against S beside the paper's, AdaScale's speed-up against S·b / B_simple, and time to target.

- Speed-up = T1 / iterations (a fixed-S run; mean over its completed seeds), per table (task, preset,
  variant), method and S, beside the ideal S and the paper's own speed-up of the same task and method
  (its S = 1 iterations over its iterations at S, paper/table2.csv).
- AdaScale's efficiency (speed-up ÷ S) beside what finding (iii) predicts for the same run: T1 over the
  iterations of a gain that follows the run's own noise scale (reports.noise.predicted_iterations: the steady
  gain bench.algo.gain.steady_gain through the estimator's moving average) — one formula for the panel and
  the finding;
  S·b/B with B the run's late noise scale (reports.noise: per window, τ-weighted, corrected for drawing
  without replacement).
- Time to target (AlgoPerf's measure): per run, the first evaluation whose metric reaches the S = 1 runs'
  mean final metric within the findings' margin Δ (reports.findings.table_margin), with its iterations,
  examples (Σ_t S_t·b up to it) and seconds (the evaluation record's wall_time_s); "not reached" where none does.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.algo.rules import title

from . import noise
from .collect import Results
from .findings import table_margin
from .paper import load_paper
from .scalefree import WORSE_FLAG
from .table2 import table_runs

SPEEDUP_METHODS = ("adascale", "lsw+")  # LSW's speed-up is S by construction
NOT_REACHED = "not reached"
TTT_COLUMNS = ["task", "variant", "scale", "method", "seed", "target", "reached", "iterations", "examples", "seconds"]
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
    ada = t[(t["method"] == "adascale") & (t["S"] >= 2) & (t["status"] == "completed")].copy()
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
    """SPEEDUP_COLUMNS per table, method (AdaScale, LSW+) and fixed S; S_b_over_B and `predicted` (finding
    (iii)'s speed-up) from AdaScale's runs; `quality`: the scale-free table's flag (a mean metric worse than
    S = 1's by more than the findings' margin: no success, whatever its speed-up)."""
    t = table_runs(res.runs)
    if t.empty:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    t = _fixed(t)
    margins = _margins(t)
    t = t[t["method"].isin(SPEEDUP_METHODS) & (t["status"] == "completed")]
    noise = noise_scales(res) if noise is None else noise
    paper = _paper_speedups()
    rows = []
    for (task, variant, method, S), g in t.groupby(["task", "variant", "method", "S"]):
        sp = (g["T1"].astype(float) / g["iterations"].astype(float)).to_numpy()
        same = noise[(noise["task"] == task) & (noise["variant"] == variant) & (noise["S"] == S)]
        nb, pred = same["B"].dropna(), same["predicted"].dropna()
        b = float(g["batch_size"].iloc[0])
        ratio = S * b / float(np.median(nb)) if len(nb) else math.nan
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
                "predicted": float(np.mean(pred)) if method == "adascale" and len(pred) else math.nan,
                "quality": WORSE_FLAG if d < -delta else "",
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


def _margins(t: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, bool]]:
    """(Δ, S = 1 mean, higher is better) per (task, variant), from the S = 1 runs (reports.findings.table_margin)."""
    out = {}
    for (task, variant), g in t.groupby(["task", "variant"]):
        base = g[(g["S"] == 1) & (g["status"] == "completed")].drop_duplicates("run_dir")
        vals = pd.to_numeric(base["val_metric"], errors="coerce").dropna().to_numpy(float)
        higher = bool(g["higher_is_better"].dropna().iloc[0]) if g["higher_is_better"].notna().any() else True
        preset = str(g["preset"].iloc[0] or "")
        m = table_margin(str(task), preset, higher, vals)
        out[(task, variant)] = (m.delta, float(np.mean(vals)) if len(vals) else math.nan, higher)
    return out


def _examples(train: pd.DataFrame, iteration: int, batch_size: float) -> float:
    """Σ S_t·b over the first `iteration` iterations (elastic runs change S)."""
    if train.empty or "scale" not in train:
        return math.nan
    s = pd.to_numeric(train["scale"], errors="coerce").to_numpy(float)[:iteration]
    return float(np.nansum(s)) * batch_size


def time_to_target(res: Results) -> pd.DataFrame:
    """TTT_COLUMNS per Table 2 run (and per method at the shared S = 1 run), against its table's S = 1 target."""
    t = table_runs(res.runs)
    rows: list[dict] = []
    if t.empty:
        return pd.DataFrame(columns=TTT_COLUMNS)
    for (task, variant), g in t.groupby(["task", "variant"]):
        base = pd.to_numeric(g.loc[(g["scale"] == "1") & (g["status"] == "completed"), "val_metric"], errors="coerce")
        base = base[np.isfinite(base)]
        if base.empty:
            continue
        higher = bool(g["higher_is_better"].dropna().iloc[0]) if g["higher_is_better"].notna().any() else True
        mean = float(base.mean())
        preset = str(g["preset"].iloc[0] or "") if "preset" in g else ""
        delta = table_margin(str(task), preset, higher, base.to_numpy(float)).delta
        target = mean - delta if higher else mean + delta
        for r in g[g["status"].isin(("completed", "diverged"))].itertuples():
            train, evals = res.metrics(r.run_dir) if r.has_metrics else (pd.DataFrame(), pd.DataFrame())
            row = {"task": task, "variant": variant, "scale": r.scale, "method": r.method, "seed": r.seed}
            row |= {"target": target, "reached": False, "iterations": math.nan, "examples": math.nan}
            row["seconds"] = math.nan
            if not evals.empty and "metric" in evals:
                m = pd.to_numeric(evals["metric"], errors="coerce")
                hit = evals[(m >= target) if higher else (m <= target)]
                if len(hit):
                    first = hit.iloc[0]
                    it = int(first["iteration"])
                    row |= {"reached": True, "iterations": it, "examples": _examples(train, it, float(r.batch_size))}
                    row["seconds"] = float(first["wall_time_s"]) if "wall_time_s" in first else math.nan
            rows.append(row)
    return pd.DataFrame(rows, columns=TTT_COLUMNS)


def ttt_summary(ttt: pd.DataFrame) -> pd.DataFrame:
    """Per task, variant, S and method: seeds that reached the target, and their median iterations,
    examples and seconds ("not reached" where no seed did)."""
    rows = []
    if ttt.empty:
        return pd.DataFrame(
            columns=["task", "variant", "scale", "method", "reached", "iterations", "examples", "seconds"]
        )
    for (task, variant, scale, method), g in ttt.groupby(["task", "variant", "scale", "method"], sort=False):
        hit = g[g["reached"].astype(bool)]
        row = {"task": task, "variant": variant, "scale": scale, "method": method, "reached": f"{len(hit)}/{len(g)}"}
        for k in ("iterations", "examples", "seconds"):
            row[k] = float(hit[k].median()) if len(hit) else NOT_REACHED
        rows.append(row)
    out = pd.DataFrame(rows)
    order = out["scale"].map(lambda s: float(s) if str(s).replace(".", "").isdigit() else math.inf)
    return out.assign(_o=order).sort_values(["task", "variant", "_o", "method"]).drop(columns="_o")


def write_csvs(res: Results, dest: Path, ttt: pd.DataFrame | None = None) -> None:
    """time_to_target.csv (one row per run) and speedup.csv under `dest`."""
    from bench.files import atomic_write_bytes

    ttt = time_to_target(res) if ttt is None else ttt
    atomic_write_bytes(
        dest / "time_to_target.csv", ttt.to_csv(index=False, float_format="%.6g").encode(errors="backslashreplace")
    )
    atomic_write_bytes(
        dest / "speedup.csv", speedups(res).to_csv(index=False, float_format="%.6g").encode(errors="backslashreplace")
    )


# ----------------------------------------------------------------------------------------- figures

SPEEDUP_CAPTION = (
    "Left: speed-up T1/iterations against S (mean over seeds) for AdaScale and LSW+ (which runs AdaScale's "
    "iterations), the ideal line (speed-up = S, LSW by construction) and the paper's own speed-ups "
    "(paper/table2.csv: its S = 1 iterations over its iterations at S), dashed: AdaScale and LSW+ of the "
    "same task in colour, AdaScale of the other paper tasks in grey; a red ✗ marks a cell whose metric misses "
    "S = 1's by more than the findings' margin (no success, whatever its speed-up). Right: AdaScale's scaling "
    "efficiency (speed-up ÷ S) against S, beside what finding (iii) predicts for the same runs: T1 over the "
    "iterations of a gain at the steady value S(B/b + 1)/(B/b + S) of each run's own noise scale, per tenth of "
    "τ through the estimator's moving average (one formula for the panel and the finding); each point labelled "
    "with S·b/B, B its late noise scale. "
    "Past the noise scale a larger batch buys fewer steps."
)


def _floats(values) -> list[float]:
    return [float(v) for v in values]


def speedup_plan(g: pd.DataFrame, paper: pd.DataFrame, task: str, variant: str) -> dict:
    """What one speed-up figure shows, as plain data (reports.figures.Renderer draws it, or keeps the PNG
    drawn from the same plan)."""
    colors = {"adascale": "tab:blue", "lsw+": "tab:orange"}
    lines, other = [], True
    for (ptask, method), p in paper[paper["method"].isin(SPEEDUP_METHODS)].groupby(["task", "method"]):
        base = p.loc[p["scale"] == "1", "iterations"]
        same = ptask == task
        if not len(base) or not (same or method == "adascale"):
            continue
        label = f"paper {title(method)}, {ptask}" if same else None
        if not same and other:
            label, other = "paper AdaScale, the other tasks", False
        lines.append(
            (label, colors[method] if same else "0.75", _floats(p["scale"]), _floats(base.iloc[0] / p["iterations"]))
        )
    methods = []
    for method in SPEEDUP_METHODS:
        m = g[g["method"] == method].sort_values("scale")
        bad = (m["quality"].fillna("") != "").to_list()
        methods.append(
            (
                {"adascale": "AdaScale", "lsw+": "LSW+"}[method],
                colors[method],
                _floats(m["scale"]),
                _floats(m["speedup"]),
                bad,
            )
        )
    ada = g[g["method"] == "adascale"].sort_values("scale")
    eff = {
        "scale": _floats(ada["scale"]),
        "eff": _floats(ada["speedup"] / ada["scale"]),
        "bad": (ada["quality"].fillna("") != "").to_list(),
        "predicted": _floats(ada["predicted"].astype(float) / ada["scale"]),
        "ratio": _floats(ada["S_b_over_B"]),
    }
    name = f"{task}{f' [{variant}]' if variant else ''}"
    return {"name": name, "paper": lines, "ideal": _floats(sorted(g["scale"].unique())), "methods": methods, "eff": eff}


def _draw_speedup(plan: dict, path: Path) -> None:
    """Left: speed-up against S; right: AdaScale's efficiency beside finding (iii)'s prediction."""
    import matplotlib.pyplot as plt

    from .figures import STYLE, _save

    with plt.rc_context(STYLE):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.4), constrained_layout=True)
        for label, color, x, y in plan["paper"]:
            ax.plot(x, y, color=color, lw=1, ls="--", marker=".", label=label)
        ax.plot(plan["ideal"], plan["ideal"], color="black", lw=1, label="ideal (= S; LSW)")
        for label, color, x, y, bad in plan["methods"]:
            ax.plot(
                x,
                [math.nan if b else v for v, b in zip(y, bad, strict=True)],
                marker="o",
                lw=2,
                color=color,
                label=label,
            )
            flagged = [(xi, yi) for xi, yi, b in zip(x, y, bad, strict=True) if b]
            if flagged:
                ax.scatter(*zip(*flagged, strict=True), marker="x", s=80, color="tab:red", zorder=4)
        ax.set(xscale="log", yscale="log", xlabel="scale S", ylabel="speed-up T1 / iterations")
        ax.set_title(f"{plan['name']}: speed-up")
        ax.legend(fontsize=9)
        e = plan["eff"]
        if e["scale"]:
            good = [not b for b in e["bad"]]
            pick = lambda xs, keep: [v for v, k in zip(xs, keep, strict=True) if k]  # noqa: E731
            bx.scatter(pick(e["scale"], good), pick(e["eff"], good), s=60, color="tab:blue", zorder=3, label="AdaScale")
            if not all(good):
                bad = [not k for k in good]
                bx.scatter(pick(e["scale"], bad), pick(e["eff"], bad), marker="x", s=80, color="tab:red", zorder=4)
            if any(math.isfinite(v) for v in e["predicted"]):
                bx.plot(
                    e["scale"], e["predicted"], color="black", ls=":", marker="o", mfc="none", label="predicted (iii)"
                )
            for x, y, ratio in zip(e["scale"], e["eff"], e["ratio"], strict=True):
                if math.isfinite(ratio):
                    bx.annotate(f"S·b/B={ratio:.2g}", (x, y), textcoords="offset points", xytext=(5, 5), fontsize=9)
            bx.set(xscale="log", xlabel="scale S", ylabel="efficiency: speed-up ÷ S", ylim=(0, 1.05))
            bx.legend(fontsize=9)
        bx.set_title("AdaScale against the noise scale")
        _save(fig, path)


def speedup_figures(res: Results, outdir: Path) -> list:
    """One figure per table (task, variant) with AdaScale or LSW+ runs at a fixed S."""
    from . import figures as F

    sp = speedups(res)
    figs: list = []
    if sp.empty:
        return figs
    paper = load_paper()
    paper = paper[pd.to_numeric(paper["scale"], errors="coerce").notna()]
    for (task, variant), g in sp.groupby(["task", "variant"]):
        path = outdir / f"speedup_{F._slug(task, variant)}.png"
        plan = speedup_plan(g, paper, task, variant)
        F._RENDERER.submit(_draw_speedup, plan, path, caption=SPEEDUP_CAPTION)
        figs.append(F.Figure("speedup", plan["name"], path, SPEEDUP_CAPTION))
    return figs


# ------------------------------------------------------------------------------------------- HTML


def ttt_html(summary: pd.DataFrame) -> str:
    """The time-to-target table: one row per task, variant, S and method."""
    import html

    if summary.empty:
        return '<p class="note">No Table 2 runs with an S = 1 run to set the target.</p>'
    out = [
        "<table><tr><th>task</th><th>S</th><th>method</th><th>seeds reached</th><th>iterations</th>"
        "<th>examples</th><th>seconds</th></tr>"
    ]
    for r in summary.itertuples():
        name = f"{r.task}{f' [{r.variant}]' if r.variant else ''}"
        cells = [name, str(r.scale), str(r.method), r.reached]
        for v, fmt in ((r.iterations, ",.0f"), (r.examples, ",.0f"), (r.seconds, ",.1f")):
            cells.append(v if isinstance(v, str) else format(v, fmt))
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    legend = (
        "Time to target (AlgoPerf): the first evaluation whose metric reaches the S = 1 runs' mean final metric "
        "within the findings' margin Δ (the findings' legend); medians over the seeds that reached it; seconds are "
        "the run's wall clock at that evaluation. Per run: time_to_target.csv."
    )
    out.append(f'<p class="legend">{html.escape(legend)}</p>')
    return "\n".join(out)


def critical_html(fits: pd.DataFrame, sweep_tab: pd.DataFrame, noise: dict[str, np.ndarray] | None = None) -> str:
    """The fitted critical batch of the sweep, one line per method (nothing without sweep runs)."""
    import html

    if sweep_tab.empty:
        return ""
    from .sweep import critical_text

    lines = critical_text(fits, noise).splitlines()
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


KINDS = {
    "speedup": (
        speedup_figures,
        "speed-up against S and against the noise scale",
        "no AdaScale or LSW+ runs at a fixed S with a summary",
    ),
}

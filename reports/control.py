"""What the positive control (bench/experiments/matrices/control.yaml) is read with, for any results folder:
speed-ups against S beside the paper's, AdaScale's speed-up against S·b / B_simple, and time to target.

- Speed-up = T1 / iterations (a fixed-S run; mean over its completed seeds), per table (task, preset,
  variant), Table 2 rule (every rule with runs: a rule whose pace is the scale, LSW, √S, LEGW, has S by
  construction) and S, beside the ideal S and the paper's own speed-up of the same task and method (its
  S = 1 iterations over its iterations at S, paper/table2.csv).
- B_simple = b·σ²/μ² (McCandlish et al. 2018), each AdaScale run's training average: b·Σσ̂²_t / Σμ̂²_t over
  its iterations, with σ̂², μ̂² the unbiased per-iteration estimates of bench.algo.gain.moments (the
  estimator's own formulas) from the sum_sq, mean_sq and scale of its metrics.jsonl.
- Time to target (AlgoPerf's measure): per run, the first evaluation whose metric reaches the S = 1 runs'
  mean final metric within the findings' margin Δ (0.5 points for an accuracy-like metric, 2 % of the
  S = 1 mean for a loss), with its iterations, examples (Σ_t S_t·b up to it) and seconds (the evaluation
  record's wall_time_s); "not reached" where none does.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import noise
from .collect import Results, rule_rows
from .findings import MARGIN_LOSS, MARGIN_POINTS, margin
from .paper import load_paper
from .table2 import place, table_runs

NOT_REACHED = "not reached"
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
TTT_COLUMNS = ["task", "variant", "scale", "method", "seed", "target", "reached", "iterations", "examples", "seconds"]
SPEEDUP_COLUMNS = ["task", "variant", "method", "scale", "speedup", "n", "ideal", "paper", "S_b_over_B"]


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    s = pd.to_numeric(df["scale"], errors="coerce")
    return df.assign(S=s)[np.isfinite(s)]


def noise_scales(res: Results) -> pd.DataFrame:
    """The Table 2 AdaScale runs (S ≥ 2, completed) with their training-average B_simple as column `B_simple`."""
    t = table_runs(res.runs)
    if t.empty:
        return t.assign(B_simple=pd.Series(dtype=float))
    t = _fixed(t)
    ada = t[(t["method"] == "adascale") & (t["S"] >= 2) & (t["status"] == "completed")].copy()
    ada["B_simple"] = [
        noise.average(res.metrics(r.run_dir)[0], float(r.batch_size)) if r.has_metrics else math.nan
        for r in ada.itertuples()
    ]
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
    """SPEEDUP_COLUMNS per table, Table 2 rule and fixed S; S_b_over_B from AdaScale's runs."""
    t = table_runs(res.runs)
    if t.empty:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    t = _fixed(t)
    t = t[t["status"] == "completed"]
    noise = noise_scales(res) if noise is None else noise
    paper = _paper_speedups()
    rows = []
    for (task, variant, method, S), g in t.groupby(["task", "variant", "method", "S"]):
        sp = (g["T1"].astype(float) / g["iterations"].astype(float)).to_numpy()
        nb = noise[(noise["task"] == task) & (noise["variant"] == variant) & (noise["S"] == S)]["B_simple"]
        b = float(g["batch_size"].iloc[0])
        median = float(np.median(nb.dropna())) if len(nb.dropna()) else math.nan
        ratio = S * b / median if median > 0 else math.nan  # a noise scale of 0 (μ² never above its noise): none
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
            }
        )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


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
        delta = margin(higher, np.asarray([mean]))
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
    "Left: speed-up T1/iterations against S (mean over seeds) for every Table 2 rule with runs (LSW+ runs "
    "AdaScale's iterations; a rule whose τ advances by S, LSW, √S, LEGW, lies on the ideal line by "
    "construction; where rules coincide, the later ones in the method table are drawn wide and pale beneath, "
    "so LSW+ is drawn wide and pale under AdaScale), the ideal line (speed-up = S) "
    "and the paper's own speed-ups (paper/table2.csv: its S = 1 "
    "iterations over its iterations at S), dashed: the same task's rules in their colour, AdaScale of the "
    "other paper tasks in grey. Right: "
    "AdaScale's scaling efficiency (speed-up ÷ S) against S·b / B_simple (each run's training-average noise "
    "scale), beside McCandlish et al.'s 1/(1 + S·b/B): past the noise scale a larger batch buys fewer steps."
)


def speedup_figures(res: Results, outdir: Path) -> list:
    """One figure per table (task, variant) with AdaScale runs at S ≥ 2."""
    import matplotlib.pyplot as plt

    from .figures import STYLE, Figure, _save, _slug

    sp = speedups(res)
    figs: list = []
    if sp.empty:
        return figs
    rows = rule_rows(res.runs)
    paper = load_paper()
    paper = paper[pd.to_numeric(paper["scale"], errors="coerce").notna()]
    order = sorted(set(sp["method"]) | {"adascale"}, key=place)
    colors = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(order)}
    for (task, variant), g in sp.groupby(["task", "variant"]):
        mine = sorted(set(g["method"]), key=place)
        with plt.rc_context(STYLE):
            fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.4), constrained_layout=True)
            other = True
            for (ptask, method), p in paper.groupby(["task", "method"]):
                base = p.loc[p["scale"] == "1", "iterations"]
                same = ptask == task and method in mine
                if not len(base) or not (same or (ptask != task and method == "adascale")):
                    continue
                label = f"paper {rows[method].title if method in rows else method}, {ptask}" if same else None
                if not same and other:
                    label, other = "paper AdaScale, the other tasks", False
                wide = same and method == "lsw+"  # LSW+ runs AdaScale's iterations: drawn wide, AdaScale on top
                ax.plot(
                    p["scale"].astype(float),
                    float(base.iloc[0]) / p["iterations"],
                    color=colors[method] if same else "0.75",
                    lw=3.5 if wide else 1,
                    alpha=0.5 if wide else 1,
                    ls="--",
                    marker=".",
                    label=label,
                    zorder=1 if wide else 2,
                )
            scales = sorted(g["scale"].unique())
            ax.plot(scales, scales, color="black", lw=1, label="ideal (= S)")
            drawn = mine[::-1]  # rules that coincide (LSW+ on AdaScale, √S on LSW) stay visible: the later ones
            for j, method in enumerate(drawn):  # in the table wide and pale beneath, AdaScale narrow on top
                m = g[g["method"] == method].sort_values("scale")
                top = j == len(drawn) - 1
                width = 1.5 + 4.5 * (len(drawn) - 1 - j) / max(1, len(drawn) - 1)
                ax.plot(
                    m["scale"],
                    m["speedup"],
                    marker=MARKERS[mine.index(method) % len(MARKERS)],
                    ms=3 + 2 * width,
                    lw=width,
                    alpha=1.0 if top else 0.45,
                    zorder=3 + j,
                    color=colors[method],
                    label=rows[method].title,
                )
            ax.set(xscale="log", yscale="log", xlabel="scale S", ylabel="speed-up T1 / iterations")
            name = f"{task}{f' [{res.variants.get(variant, variant)}]' if variant else ''}"
            ax.set_title(f"{name}: speed-up")
            ax.legend(fontsize=9)
            ada = g[(g["method"] == "adascale") & np.isfinite(g["S_b_over_B"].astype(float))]
            if len(ada):
                x = ada["S_b_over_B"].astype(float)
                bx.scatter(x, ada["speedup"] / ada["scale"], s=60, color="tab:blue", zorder=3, label="AdaScale")
                for r in ada.itertuples():
                    bx.annotate(
                        f"S={r.scale:g}",
                        (r.S_b_over_B, r.speedup / r.scale),
                        textcoords="offset points",
                        xytext=(5, 5),
                        fontsize=9,
                    )
                grid = np.geomspace(min(x.min(), 0.1), max(x.max(), 10.0), 100)
                bx.plot(grid, 1 / (1 + grid), color="black", ls=":", label="1 / (1 + S·b/B)")
                bx.set(xscale="log", xlabel="S·b / B_simple", ylabel="efficiency: speed-up ÷ S")
                bx.legend(fontsize=9)
            bx.set_title("AdaScale against the noise scale")
            path = _save(fig, outdir / f"speedup_{_slug(task, variant)}.png")
        figs.append(Figure("speedup", name, path, SPEEDUP_CAPTION, variant))
    return figs


# ------------------------------------------------------------------------------------------- HTML


def ttt_html(summary: pd.DataFrame, variants: dict[str, str] | None = None) -> str:
    """The time-to-target table: one row per task, variant (by its short name), S and method."""
    import html

    if summary.empty:
        return '<p class="note">No Table 2 runs with an S = 1 run to set the target.</p>'
    out = [
        "<table><tr><th>task</th><th>S</th><th>method</th><th>seeds reached</th><th>iterations</th>"
        "<th>examples</th><th>seconds</th></tr>"
    ]
    for r in summary.itertuples():
        name = f"{r.task}{f' [{(variants or {}).get(r.variant, r.variant)}]' if r.variant else ''}"
        cells = [name, str(r.scale), str(r.method), r.reached]
        for v, fmt in ((r.iterations, ",.0f"), (r.examples, ",.0f"), (r.seconds, ",.1f")):
            cells.append(v if isinstance(v, str) else format(v, fmt))
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    legend = (
        "Time to target (AlgoPerf): the first evaluation whose metric reaches the S = 1 runs' mean final metric "
        f"within the findings' margin (Δ = {MARGIN_POINTS:g} points for accuracy-like metrics, {MARGIN_LOSS:.0%} "
        "of the S = 1 mean for losses); medians over the seeds that reached it; seconds are the run's wall "
        "clock at that evaluation. Per run: time_to_target.csv."
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
        "no completed Table 2 runs at a fixed S",
    ),
}

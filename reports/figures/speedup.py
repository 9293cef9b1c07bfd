"""The speed-up figure: per table, speed-up against S beside the paper's and AdaScale's efficiency beside
finding (iii)'s prediction, drawn from reports.speed.speedup's table (`speedup_figures`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.core.algo.rules import ADASCALE, LSW_PLUS
from reports.figures import render
from reports.figures.style import STYLE, Figure, _save, _slug
from reports.rundata.collect import Results, rule_rows
from reports.speed.speedup import speedups
from reports.tables.paper import load_paper
from reports.tables.table2 import place

MARKERS = ("o", "s", "^", "D", "v", "P", "X")

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

    with plt.rc_context(STYLE):
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
        _save(fig, path)


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
        path = outdir / f"speedup_{_slug(task, res.variants.get(variant, variant))}.png"
        name = f"{task}{f' [{res.variants.get(variant, variant)}]' if variant else ''}"
        plan = speedup_plan(g, paper, task, name, rows, colors)
        render.current().submit(_draw_speedup, plan, path, caption=SPEEDUP_CAPTION)
        figs.append(Figure("speedup", name, path, SPEEDUP_CAPTION, variant))
    return figs

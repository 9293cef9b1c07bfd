"""Figure kind `table2_efficiency`: the paper's Table 2 and ours on one axis, where the S differ.

Our tiny presets run S = 1, 2, 4, … and the paper its own S per task, so a table of the two lines few cells
up. Against S (log) every cell has a place: the scaling efficiency T1 / (S · iterations) of each rule — the
scale-free table's numbers (reports.speed.scalefree), in its number format — ours as filled points with the seeds'
range, the paper's Table 2 as hollow diamonds of the rule's colour, and the cells that bought their speed with
the metric (worse than S = 1 by more than the margin Δ, or diverged) marked on both sides, each side its own
marker. One figure of small multiples, a panel per table, one y range and one compact legend above them. A
task the paper has no rows for gets no panel: it has nothing to stand beside.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from bench.core.algo.rules import method_order
from bench.core.methods import title
from reports.figures import render
from reports.figures.style import STYLE, Figure, _save
from reports.rundata.collect import Results, rule_rows, scale_order
from reports.speed import scalefree as SF
from reports.stats.noninferiority import card_margin
from reports.tables.paper import load_paper
from reports.tables.table2 import cells_of, table_runs

KIND = "table2_efficiency"
DODGE = 0.09  # rules at one S drawn this far apart in log2 S, so coinciding points (LSW+ on AdaScale) both show
FMT = ".2f"  # the scale-free table's format for speed-up and efficiency (reports.page.scalefree_html)
CAPTION = (
    "Scaling efficiency T1 / (S · iterations) against S (log axis), the scale-free table's numbers drawn: 1 is "
    "perfect linear scaling (S times fewer iterations than S = 1), T1 the S = 1 iterations (ours: the runs' T1; "
    "the paper's: its S = 1 row). Filled points: ours, the mean over seeds with a bar from the lowest to the "
    "highest seed; hollow diamonds of the same colour: the paper's Table 2 at its own S. One panel per task, one "
    "y range. Lost quality (worse than S = 1 by more than the margin Δ — the paper's: its preset's; ours: the "
    "findings' Δ of the table — or diverged, its efficiency from the planned iterations): ours a filled X, the "
    "paper's a small x in its diamond, labelled with its Δmetric as the scale-free table prints it. At each S "
    "the rules are drawn a little apart along S, so points "
    "that coincide (LSW+ runs AdaScale's iterations) stay visible. Elastic rows have no single S and are left "
    "out."
)


def _floats(values) -> list[float]:
    return [float(v) for v in pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce")]


def _seed_ranges(runs: pd.DataFrame, t: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """(method, S) -> (lowest, highest) per-seed efficiency T1 / (S · iterations) of the table's completed
    runs, T1 the one the table's row uses."""
    r0 = t.iloc[0]
    tr = runs[(runs["task"] == r0["task"]) & (runs["preset"] == r0["preset"]) & (runs["variant"] == r0["variant"])]
    tr = tr[(tr["status"] == "completed") & tr["scale"].map(lambda s: scale_order(s)[0] == 0)]
    out = {}
    for (method, scale), g in tr.groupby(["method", "scale"]):
        T1 = t.loc[(t["method"] == method) & (t["scale"] == scale), "T1"]
        its = pd.to_numeric(g["iterations"], errors="coerce").to_numpy(float)
        eff = float(T1.iloc[0]) / (float(scale) * its[its > 0]) if len(T1) else np.array([])
        eff = eff[np.isfinite(eff)]
        if len(eff):
            out[(str(method), str(scale))] = (float(eff.min()), float(eff.max()))
    return out


def _paper_side(t: pd.DataFrame, margin: float | None) -> dict:
    """The paper's cells of one rule: S, efficiency, crossed (degraded or diverged) and each cross's label."""
    p = t[t["paper_efficiency"].notna()]
    pairs = zip(_floats(p["paper_d_metric"]), p["paper_diverged"].fillna(False).astype(bool), strict=True)
    text = [SF.paper_quality(d, diverged, margin) for d, diverged in pairs]
    return {"x": _floats(p["scale"]), "y": _floats(p["paper_efficiency"]), "bad": [bool(s) for s in text], "text": text}


def _our_side(t: pd.DataFrame, ranges: dict) -> dict:
    """Our cells of one rule: S, efficiency (the table's), the seeds' range and whether quality was lost."""
    o = t[t["efficiency"].notna()]  # ours: a cell with a completed or diverged seed (the table's efficiency)
    spans = [ranges.get((str(m), str(s)), (math.nan, math.nan)) for m, s in zip(o["method"], o["scale"], strict=True)]
    lo, hi = [a for a, _ in spans], [b for _, b in spans]
    bad = [bool(q) for q in o["quality"].fillna("")]
    return {"x": _floats(o["scale"]), "y": _floats(o["efficiency"]), "lo": lo, "hi": hi, "bad": bad}


def plan_of(t: pd.DataFrame, ranges: dict, name: str, titles: dict[str, str]) -> dict:
    """What one figure shows, as plain data (drawn by `_draw`, or kept when the PNG was drawn from the same)."""
    task = str(t["task"].iloc[0])
    margin = card_margin(task, "paper")[0]
    methods = sorted(set(t["method"]), key=method_order)
    rules = []
    for i, method in enumerate(methods):
        m = t[(t["method"] == method) & t["scale"].map(lambda s: scale_order(s)[0] == 0)]
        color = plt.get_cmap("tab10")(method_order(method) % 10)
        shift = 2 ** (DODGE * (i - (len(methods) - 1) / 2))
        rules.append({"title": titles.get(method) or title(method), "color": list(color), "shift": shift}
                     | {"ours": _our_side(m, ranges), "paper": _paper_side(m, margin)})  # fmt: skip
    return {"name": name, "rules": rules, "paper_margin": margin}


# Markers (distinct on both sides): ours filled, the paper's hollow diamonds; a lost cell ours a filled X, the
# paper's its diamond with a small x inside
OURS, OURS_LOST, PAPER, PAPER_LOST = "o", "X", "D", "x"


def _draw_rule(ax, rule: dict) -> None:
    """One rule's points: ours filled with the seeds' range, the paper's hollow, lost cells marked."""
    c, k = rule["color"], rule["shift"]
    o, p = rule["ours"], rule["paper"]
    for x, y, lo, hi, bad in zip(o["x"], o["y"], o["lo"], o["hi"], o["bad"], strict=True):
        err = [[max(y - lo, 0)], [max(hi - y, 0)]] if math.isfinite(lo) else None
        marker, ms = (OURS_LOST, 10) if bad else (OURS, 7)
        ax.errorbar([x * k], [y], yerr=err, fmt=marker, ms=ms, color=c, mec="black" if bad else c, capsize=3, zorder=4)
    for x, y, bad, text in zip(p["x"], p["y"], p["bad"], p["text"], strict=True):
        ax.plot([x * k], [y], PAPER, ms=9, mfc="none", mew=1.6, color=c, zorder=3)
        if bad:
            ax.plot([x * k], [y], PAPER_LOST, ms=5, mew=1.5, color="black", zorder=5)
            ax.annotate(text, (x * k, y), textcoords="offset points", xytext=(7, -2), ha="left", va="top",
                        fontsize=8, color=c)  # fmt: skip


def _legend(fig, plan: dict) -> None:
    """One compact legend above the panels: the rules by colour, then what each marker means."""
    kw = {"ls": "none", "color": "black"}
    titles = dict.fromkeys(r["title"] for panel in plan["panels"] for r in panel["rules"])
    colors = {r["title"]: r["color"] for panel in plan["panels"] for r in panel["rules"]}
    handles = [Line2D([], [], marker="s", ls="none", ms=8, color=colors[t], label=t) for t in titles]
    handles += [
        Line2D([], [], marker=OURS, ms=7, label="ours (bar: seeds' range)", **kw),
        Line2D([], [], marker=OURS_LOST, ms=9, mec="black", label="ours, lost quality", **kw),
        Line2D([], [], marker=PAPER, ms=9, mfc="none", mew=1.6, label="paper (Table 2)", **kw),
        Line2D([], [], marker=PAPER_LOST, ms=6, mew=1.5, label="paper, lost quality (its Δmetric)", **kw),
        Line2D([], [], color="black", lw=1, ls=":", label="linear scaling"),
    ]
    fig.legend(handles=handles, loc="outside upper center", ncol=min(len(handles), 5), fontsize=9, frameon=False)


def _axes(ax, panel: dict, top: float) -> None:
    """S's own values as ticks (no 2×10⁰), efficiency in the table's format, one y range for every panel."""
    xs = sorted({x for r in panel["rules"] for side in ("ours", "paper") for x in r[side]["x"] if x > 0})
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=8)
    if xs:
        ax.set_xlim(xs[0] / 1.4, xs[-1] * 2.2)  # room right of the last S for its crosses' labels
    ax.set_ylim(0, top * 1.1)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format(v, FMT)))
    ax.axhline(1.0, color="black", lw=1, ls=":", zorder=1)
    ax.set_title(panel["name"], fontsize=11)


def _top(plan: dict) -> float:
    ys = [
        y
        for panel in plan["panels"]
        for r in panel["rules"]
        for side in ("ours", "paper")
        for y in r[side]["y"] + r[side].get("hi", [])
    ]
    return max([1.0, *(y for y in ys if math.isfinite(y))])


def _draw(plan: dict, path: Path) -> None:
    """Small multiples: one panel per table, side by side (three a row), one y range, one legend above."""
    n = len(plan["panels"])
    cols = min(3, n)
    rows = math.ceil(n / cols)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.1 * rows + 0.9), squeeze=False, sharey=True,
                                 constrained_layout=True)  # fmt: skip
        top = _top(plan)
        for k, ax in enumerate(axes.flat):
            if k >= n:
                ax.set_visible(False)
                continue
            for rule in plan["panels"][k]["rules"]:
                _draw_rule(ax, rule)
            _axes(ax, plan["panels"][k], top)
        fig.supxlabel("scale S (ours and the paper's own)", fontsize=10)
        fig.supylabel("efficiency T1 / (S · iterations)", fontsize=10)
        _legend(fig, plan)
        _save(fig, path)


def _own(plan: dict) -> str:
    """The figure's own sentences: which S each side ran, per panel, and each panel's paper margin."""

    def scales(panel: dict, side: str) -> str:
        xs = sorted({x for r in panel["rules"] for x in r[side]["x"]})
        return ", ".join(f"{x:g}" for x in xs) or "none"

    parts = []
    for panel in plan["panels"]:
        margin = panel["paper_margin"]
        at = f"{panel['name']}: ours at S = {scales(panel, 'ours')}, the paper's at S = {scales(panel, 'paper')}"
        parts.append(at + (f" (the paper's Δ = {margin:g})" if margin else ""))
    return " " + "; ".join(parts) + "."


def table2_efficiency(res: Results, outdir: Path) -> list[Figure]:
    """One figure per table (task, preset, variant) whose task the paper's Table 2 has."""
    c = cells_of(res)
    if c.empty:
        return []
    paper = load_paper()
    sf = SF.scalefree(c, res.runs, paper[paper["task"].isin(set(c["task"]))])
    runs = table_runs(res.runs)
    titles = {m: r.title for m, r in rule_rows(res.runs).items()}  # a user's rule by its recorded title
    panels, variants = [], []
    for table, t in sf.groupby("table", sort=False):
        if not t["paper_efficiency"].notna().any():
            continue  # the paper has no row for this task
        row = c[c["table"] == table].iloc[0]
        short = res.variants.get(row["variant"], row["variant"])
        name = f"{row['task']}{f' [{short}]' if short else ''}"
        t = t.assign(variant=row["variant"])
        panels.append(plan_of(t, _seed_ranges(runs, t), name, titles))
        variants.append(str(row["variant"] or ""))
    if not panels:
        return []
    plan = {"name": "scaling efficiency beside the paper's Table 2", "panels": panels}
    path = outdir / "table2_efficiency.png"
    caption = CAPTION + _own(plan)
    render.current().submit(_draw, plan, path, caption=caption)
    return [Figure(KIND, "ours beside the paper's Table 2, one panel per task", path, caption, "")]

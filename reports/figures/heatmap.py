"""Figure kind `heatmap`: the panels of the paper's Figure 5, validation metric over initial lr × total
decrease."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from reports.figures.style import STYLE, Figure, _finite, _save, _slug
from reports.rundata.collect import Results, task_info

PANELS = ("S=1", "AdaScale S=16", "LSW S=16", "scaled SGD S=16")


def heatmap_points(g: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, lr0, decay): mean validation metric of the completed seeds and a diverged flag."""
    fin = g[g["status"].isin(("completed", "diverged"))]
    fin = fin[np.isfinite(fin["lr0"].astype(float)) & np.isfinite(fin["decay"].astype(float))]
    fin = fin[(fin["lr0"] > 0) & (fin["decay"] > 0)]
    rows = []
    for (panel, lr0, decay), p in fin.groupby(["panel", "lr0", "decay"], dropna=False):
        done = _finite(p.loc[p["status"] == "completed", "val_metric"])
        diverged = bool((p["status"] == "diverged").any()) or not len(done)
        rows.append(
            {
                "panel": panel,
                "lr0": float(lr0),
                "decay": float(decay),
                "value": math.nan if diverged else float(done.mean()),
                "diverged": diverged,
                "n": len(p),
            }
        )
    return pd.DataFrame(rows, columns=["panel", "lr0", "decay", "value", "diverged", "n"])


def _log_ticks(ax, values: np.ndarray, axis: str) -> None:
    fmt = FuncFormatter(lambda v, _: f"{10**v:.3g}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    u = np.unique(np.round(values, 9))
    if 1 <= len(u) <= 7:  # the grid's own values: a one-value axis gets its one tick, not invented ones
        target.set_ticks(u)
    else:
        target.set_major_locator(MaxNLocator(6))
    target.set_major_formatter(fmt)


def edges(centres: np.ndarray) -> np.ndarray:
    """The edges of the cells around sorted grid values (log10): midway between neighbours, the outer ones
    as far out as the nearest inner one (one value: half a decade each way)."""
    c = np.unique(centres)
    if len(c) == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def cells(p: pd.DataFrame, worst: float) -> tuple[np.ndarray, ...]:
    """A panel's points as cells: (lr values, decay values, their cell edges, values, diverged) on the grid
    of its own log10 lr0 × log10 decay values, a cell per point (its mean over seeds; a diverged point the
    worst value) and NaN where the grid has no finished point. A cell's edges lie midway (in log10) between
    its value and its neighbours': the value is in the cell, not always at its centre."""
    x, y = np.log10(p["lr0"].to_numpy(float)), np.log10(p["decay"].to_numpy(float))
    ux, uy = np.unique(x), np.unique(y)
    z = np.full((len(uy), len(ux)), np.nan)
    div = np.zeros(z.shape, bool)
    i, j = np.searchsorted(ux, x), np.searchsorted(uy, y)
    bad = p["diverged"].to_numpy(bool)
    z[j, i] = np.where(bad, worst, p["value"].to_numpy(float))
    div[j, i] = bad
    return ux, uy, edges(ux), edges(uy), z, div


def threshold_edges(xe: np.ndarray, ye: np.ndarray, z: np.ndarray, div: np.ndarray, good) -> list:
    """The cell edges between a cell that reaches the threshold (`good` of its value, not diverged) and a
    neighbour that does not: the threshold's contour drawn on the grid, not interpolated between points."""
    ok = np.isfinite(z)
    reach = ok & ~div & good(np.where(ok, z, 0.0))
    segs = []
    for j in range(z.shape[0]):
        for i in range(z.shape[1]):
            if i + 1 < z.shape[1] and ok[j, i] and ok[j, i + 1] and reach[j, i] != reach[j, i + 1]:
                segs.append([(xe[i + 1], ye[j]), (xe[i + 1], ye[j + 1])])
            if j + 1 < z.shape[0] and ok[j, i] and ok[j + 1, i] and reach[j, i] != reach[j + 1, i]:
                segs.append([(xe[i], ye[j + 1]), (xe[i + 1], ye[j + 1])])
    return segs


def _panel(ax, p: pd.DataFrame, worst: float, cmap, norm, threshold: float | None, higher: bool) -> bool:
    """One panel's cells, its diverged points marked ×, its best cell ★, and the threshold's edges; whether a
    line was drawn."""
    xc, yc, xe, ye, z, div = cells(p, worst)
    ax.set_facecolor("#e4e4e4")  # a grid point without a finished run
    ax.pcolormesh(xe, ye, np.ma.masked_invalid(z), cmap=cmap, norm=norm, edgecolors="white", linewidth=0.6)
    jj, ii = np.nonzero(div)
    if len(ii):
        ax.scatter(xc[ii], yc[jj], c="red", marker="x", s=90, linewidths=2.5, zorder=4)
    segs = []
    best = np.where(np.isfinite(z) & ~div, z, np.nan)
    if np.isfinite(best).any():  # the panel's best cell, as the paper's Figure 5 marks it
        j, i = np.unravel_index(np.nanargmax(best) if higher else np.nanargmin(best), best.shape)
        ax.scatter(xc[i], yc[j], marker="*", s=320, c="white", edgecolors="black", linewidths=1.2, zorder=5)
    if threshold is not None:
        segs = threshold_edges(xe, ye, z, div, (lambda v: v >= threshold) if higher else (lambda v: v <= threshold))
        ax.add_collection(LineCollection(segs, colors="red", linewidths=2.6, zorder=3))
    ax.set_xlim(xe[0], xe[-1])
    ax.set_ylim(ye[0], ye[-1])
    _log_ticks(ax, xc, "x")
    _log_ticks(ax, yc, "y")
    return bool(segs)


BIG = {  # four panels get scaled down
    "font.size": 15,
    "axes.titlesize": 16,
    "axes.labelsize": 15,
    "xtick.labelsize": 14,
    "ytick.labelsize": 14,
    "legend.fontsize": 14,
    "figure.titlesize": 18,
}


def heatmaps(res: Results, outdir: Path) -> list[Figure]:
    """Per (task, grid): the panels of the paper's Figure 5 side by side, a cell per grid point."""
    df = res.runs
    df = df[df["experiment_kind"] == "heatmap"] if not df.empty else df
    figs: list[Figure] = []
    if df.empty:
        return figs
    for (task, grid), g in df.groupby(["task", df["grid"].fillna("grid")]):
        pts = heatmap_points(g)
        if not pts.empty:
            figs.append(_heatmap(g, pts, task, grid, outdir))
    return figs


def _heatmap(g: pd.DataFrame, pts: pd.DataFrame, task: str, grid: str, outdir: Path) -> Figure:
    label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
    present = list(pts["panel"].dropna().unique())
    panels = [p for p in PANELS if p in present] + sorted(p for p in present if p not in PANELS)
    finite = _finite(pts["value"])
    vmin, vmax = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    if vmax <= vmin:
        pad = abs(vmin) * 0.05 or 0.5
        vmin, vmax = vmin - pad, vmax + pad
    cmap = plt.get_cmap("viridis" if higher else "viridis_r")
    norm = mcolors.Normalize(vmin, vmax)
    thr = _finite(g["threshold"])
    threshold = float(thr[0]) if len(thr) else None
    n = len(panels)
    with plt.rc_context({**STYLE, **BIG, "axes.grid": False}):
        # panels share the lr axis only when their lr0 grids are the same (scaled SGD searches its own)
        shared = len({tuple(sorted(set(pts.loc[pts["panel"] == q, "lr0"]))) for q in panels}) == 1
        fig, axes = plt.subplots(
            1, n, figsize=(4.4 * n + 1.8, 5.2), squeeze=False, constrained_layout=True, sharex=shared, sharey=True
        )
        axes = axes[0]
        drew_threshold = False
        for ax, panel in zip(axes, panels, strict=True):
            p = pts[pts["panel"] == panel]
            drew_threshold |= _panel(ax, p, vmin if higher else vmax, cmap, norm, threshold, higher)
            its = _finite(g.loc[(g["panel"] == panel) & (g["status"] == "completed"), "iterations"])
            t_text = f"T = {its.mean():.0f}" if len(its) else "T = –"
            ax.set_title(f"{panel}\n{t_text}, {len(p)} points")
            ax.set_xlabel("initial lr (log scale)")
        fig.get_layout_engine().set(wspace=0.06)  # room between one panel's last x label and the next's first
        for ax in axes[1:]:
            ax.tick_params(labelleft=False)  # the decay axis is shared
        axes[0].set_ylabel("total decrease (log scale)")
        sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
        arrow = "higher" if higher else "lower"
        fig.colorbar(sm, ax=list(axes), label=f"validation {label} ({arrow} is better)", shrink=0.9)
        handles = [Line2D([], [], color="white", marker="*", ms=16, mec="black", ls="", label="best cell of a panel")]
        if (pts["diverged"]).any():
            handles.append(Line2D([], [], color="red", marker="x", ls="", mew=2, label="diverged (worst colour)"))
        if drew_threshold:  # only a line that is drawn gets a legend entry
            handles.append(Line2D([], [], color="red", lw=2.6, label=f"threshold {threshold:g}"))
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
        fig.suptitle(f"Figure 5 (heat map) — {task}: validation {label} over exponential-decay schedules")
        path = _save(fig, outdir / f"figure5_heatmap_{_slug(task, grid)}.png")  # the paper figure it rebuilds
    return Figure(
        "heatmap",
        f"Figure 5 — {task} heat map" + (f" ({grid})" if grid not in (f"{task}-grid", "grid") else ""),
        path,
        f"Panels: {', '.join(panels)}; a cell per grid point, its mean over seeds (grey: no finished run); one "
        "colour scale for all panels; ★ each panel's best cell; T in each title is the panel's mean iterations"
        + ("." if shared else "; each panel on its own lr axis (scaled SGD searches its own initial lr).")
        + _threshold_note(threshold, drew_threshold),
    )


def _threshold_note(threshold: float | None, drawn: bool) -> str:
    if threshold is None:
        return ""
    if drawn:
        return f" Red line: the threshold {threshold:g}, between the cells that reach it and those that do not."
    return f" Threshold {threshold:g}: no line (in no panel do neighbouring cells fall on both sides of it)."

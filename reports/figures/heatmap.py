"""Figure kind `heatmap`: the panels of the paper's Figure 5, validation metric over initial lr × total
decrease."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..collect import Results, task_info
from .style import STYLE, Figure, _finite, _save, _slug

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


def _draw_surface(ax, x, y, z, levels, cmap, norm):
    """Filled contours on a complete regular grid, else on a triangulation; None when neither works."""
    ux, uy = np.unique(x), np.unique(y)
    if len(ux) >= 2 and len(uy) >= 2 and len(ux) * len(uy) == len(x):
        grid = pd.DataFrame({"x": x, "y": y, "z": z}).pivot(index="y", columns="x", values="z")
        if grid.notna().all().all():
            X, Y = np.meshgrid(grid.columns.to_numpy(float), grid.index.to_numpy(float))
            return ax.contourf(X, Y, grid.to_numpy(float), levels=levels, cmap=cmap, norm=norm, extend="both"), (
                X,
                Y,
                grid.to_numpy(float),
            )
    if len(x) >= 3:
        try:
            cs = ax.tricontourf(x, y, z, levels=levels, cmap=cmap, norm=norm, extend="both")
            return cs, (x, y, z)
        except (ValueError, RuntimeError):  # collinear or degenerate points
            pass
    return None, None


def heatmaps(res: Results, outdir: Path) -> list[Figure]:
    df = res.runs
    df = df[df["experiment_kind"] == "heatmap"] if not df.empty else df
    figs: list[Figure] = []
    if df.empty:
        return figs
    for (task, grid), g in df.groupby(["task", df["grid"].fillna("grid")]):
        pts = heatmap_points(g)
        if pts.empty:
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        present = list(pts["panel"].dropna().unique())
        panels = [p for p in PANELS if p in present] + sorted(p for p in present if p not in PANELS)
        values = pts["value"].to_numpy(float)
        finite = values[np.isfinite(values)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
        if vmax <= vmin:
            pad = abs(vmin) * 0.05 or 0.5
            vmin, vmax = vmin - pad, vmax + pad
        worst = vmin if higher else vmax
        levels = np.linspace(vmin, vmax, 15)
        cmap = plt.get_cmap("viridis" if higher else "viridis_r")
        norm = mcolors.Normalize(vmin, vmax)
        thr = _finite(g["threshold"])
        threshold = float(thr[0]) if len(thr) else None
        n = len(panels)
        big = {
            "font.size": 15,
            "axes.titlesize": 16,
            "axes.labelsize": 15,
            "xtick.labelsize": 14,
            "ytick.labelsize": 14,
            "legend.fontsize": 14,
            "figure.titlesize": 18,
        }  # four panels get scaled down
        with plt.rc_context({**STYLE, **big, "axes.grid": False}):
            # panels share the lr axis only when their lr0 grids are the same (scaled SGD searches its own)
            grids = {tuple(sorted(set(pts.loc[pts["panel"] == q, "lr0"]))) for q in panels}
            shared = len(grids) == 1
            fig, axes = plt.subplots(
                1, n, figsize=(4.4 * n + 1.8, 5.2), squeeze=False, constrained_layout=True, sharex=shared, sharey=True
            )
            axes = axes[0]
            drew_threshold = False
            for ax, panel in zip(axes, panels, strict=True):
                p = pts[pts["panel"] == panel]
                x, y = np.log10(p["lr0"].to_numpy(float)), np.log10(p["decay"].to_numpy(float))
                z = np.where(p["diverged"].to_numpy(bool), worst, p["value"].to_numpy(float))
                cs, surface = _draw_surface(ax, x, y, z, levels, cmap, norm)
                if cs is None:
                    ax.scatter(x, y, c=z, cmap=cmap, norm=norm, s=400, marker="s")
                elif threshold is not None and vmin < threshold < vmax:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        sx, sy, sz = surface
                        draw = ax.contour if np.ndim(sx) == 2 else ax.tricontour
                        line = draw(sx, sy, sz, levels=[threshold], colors="red", linewidths=2.2)
                        drew_threshold |= bool(line.allsegs and any(len(seg) for seg in line.allsegs[0]))
                ok = ~p["diverged"].to_numpy(bool)
                ax.scatter(x[ok], y[ok], c="black", s=14, zorder=3, clip_on=False)
                if (~ok).any():
                    ax.scatter(x[~ok], y[~ok], c="red", marker="x", s=90, linewidths=2.5, zorder=4, clip_on=False)
                _log_ticks(ax, x, "x")
                _log_ticks(ax, y, "y")
                its = _finite(g.loc[(g["panel"] == panel) & (g["status"] == "completed"), "iterations"])
                t_text = f"T = {its.mean():.0f}" if len(its) else "T = –"
                ax.set_title(f"{panel}\n{t_text}, {len(p)} points")
                ax.set_xlabel("initial lr (log scale)")
            fig.get_layout_engine().set(wspace=0.06)  # room between one panel's last x label and the next's first
            for ax in axes[1:]:
                ax.tick_params(labelleft=False)  # the decay axis is shared
            axes[0].set_ylabel("total decrease (log scale)")
            sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
            fig.colorbar(
                sm, ax=list(axes), label=f"validation {label} ({'higher' if higher else 'lower'} is better)", shrink=0.9
            )
            handles = [Line2D([], [], color="black", marker="o", ls="", label="grid point")]
            if (pts["diverged"]).any():
                handles.append(Line2D([], [], color="red", marker="x", ls="", mew=2, label="diverged (worst colour)"))
            if drew_threshold:  # only a line that is drawn gets a legend entry
                handles.append(Line2D([], [], color="red", lw=2.2, label=f"threshold {threshold:g}"))
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
            fig.suptitle(f"{task} heat map '{grid}': validation {label} over exponential-decay schedules")
            path = _save(fig, outdir / f"heatmap_{_slug(task, grid)}.png")
        figs.append(
            Figure(
                "heatmap",
                f"{task}: {grid}",
                path,
                f"Panels: {', '.join(panels)}; mean over seeds; one colour scale for all panels; T in each title "
                "is the panel's mean iterations"
                + ("." if shared else "; each panel on its own lr axis (scaled SGD searches its own initial lr).")
                + _threshold_note(threshold, drew_threshold),
            )
        )
    return figs


def _threshold_note(threshold: float | None, drawn: bool) -> str:
    if threshold is None:
        return ""
    if drawn:
        return f" Red line: the threshold {threshold:g}."
    return f" Threshold {threshold:g}: no line (no panel's surface crosses it on this grid)."

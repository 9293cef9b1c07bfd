"""Figure kind `sweep`: the critical-batch sweep, data epochs to reach the target against global batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.core.algo.rules import ADASCALE
from reports.figures.style import STYLE, Figure, _finite, _plain_log, _save, _slug
from reports.rundata.collect import Results
from reports.speed.sweep import SWEEP_METHODS, noise_scales, sweep_points, sweep_runs

SWEEP_COLORS = {"fixed": "tab:gray", "linear": "tab:orange", ADASCALE: "tab:blue"}


def _method_lines(ax: Any, pts: pd.DataFrame, cap: float) -> None:
    """One line per method (the sweep's own first, in their order), its unreached points open at the cap."""
    methods = [m for m in SWEEP_METHODS if m in set(pts["method"])]
    methods += sorted(m for m in set(pts["method"]) if m not in SWEEP_METHODS)
    for m in methods:
        p = pts[pts["method"] == m].sort_values("batch")
        name = SWEEP_METHODS.get(m, m)
        color = SWEEP_COLORS.get(m)
        line = ax.plot(p["batch"], p["epochs_to_target"], marker="o", ms=8, lw=2, color=color, label=name)[0]
        miss = p[~p["reached"].astype(bool)]
        if len(miss):
            ax.scatter(
                miss["batch"],
                [cap] * len(miss),
                s=90,
                facecolors="none",
                linewidths=2,
                edgecolors=line.get_color(),
                zorder=3,
            )


def _fit_lines(ax: Any, pts: pd.DataFrame, fits: pd.DataFrame | None) -> None:
    """Each fitted steps–examples trade-off as a dotted curve over the batches it reached, with its B_crit."""
    for r in (fits if fits is not None else pd.DataFrame()).itertuples():
        p = pts[(pts["method"] == r.method) & pts["reached"].astype(bool)]
        if p.empty or not r.epoch_examples > 0 or r.degenerate:  # no knee in the data: no line (b_crit.csv)
            continue
        grid = np.geomspace(p["batch"].min(), p["batch"].max(), 100)
        color = SWEEP_COLORS.get(r.method)
        ax.plot(grid, r.E_min * (1 + grid / r.B_crit) / r.epoch_examples, color=color, ls=":", lw=1.5)
        ax.axvline(
            r.B_crit,
            color=color,
            ls=":",
            lw=1.5,
            label=f"fit, {SWEEP_METHODS.get(r.method, r.method)}: B_crit = E_min/S_min ≈ {r.B_crit:,.0f}"
            + (f" [{r.B_crit_lo:,.0f}, {r.B_crit_hi:,.0f}]" if np.isfinite(r.B_crit_lo) else "")
            + ("\n(its noise scale read back)" if r.method == ADASCALE else "\n(lr not tuned per batch)"),
        )


def _sweep_plot(
    pts: pd.DataFrame, cap: float, noise: np.ndarray, title: str, path: Path, fits: pd.DataFrame | None = None
) -> Path:
    """Epochs to target against global batch (log–log), one line per method; unreached points as open
    markers at the cap; the median training-average noise scale, labelled a proxy (no series tunes its lr per
    batch, so no critical batch is measured); each fitted steps–examples trade-off
    (reports.speed.sweep.critical_batches) as a dotted curve with its B_crit and what it measures."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(14, 6.2), constrained_layout=True)  # the axes' width, and the legend's
        _method_lines(ax, pts, cap)
        if (~pts["reached"].astype(bool)).any():
            ax.scatter(
                [],
                [],
                s=90,
                facecolors="none",
                edgecolors="black",
                linewidths=2,
                label=f"target not reached (shown at the {cap:g}-epoch cap)",
            )
            ax.axhline(cap, color="black", lw=0.8, ls=":")
        if len(noise):
            b_crit = float(np.median(noise))
            ax.axvline(
                b_crit,
                color="tab:red",
                ls="--",
                lw=2,
                label=f"training-average B_simple ≈ {b_crit:,.0f} (median of {len(noise)} AdaScale runs):\n"
                "a proxy for the critical batch at a tuned lr, not a measured one",
            )
        _fit_lines(ax, pts, fits)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax, "x", pts["batch"].to_numpy(float))
        _plain_log(ax, "y", np.append(pts["epochs_to_target"].to_numpy(float), cap))
        ax.set_xlabel("global batch size (examples)")
        ax.set_ylabel("data epochs to reach the target")
        ax.set_title(title)
        handles, labels = ax.get_legend_handles_labels()  # beside the axes: inside, it covered the fixed-lr line
        fig.legend(handles, labels, loc="outside right upper")
        return _save(fig, path)


SWEEP_CAPTION = (
    "Filled markers: mean epochs over seeds that all reached the target; open markers: not reached. No series "
    "tunes its lr per batch, so no critical batch (McCandlish et al. 2018) is measured: AdaScale's fitted B_crit "
    "is its own noise scale read back, the others' the knee of their lr rule; intervals include the fit's misfit "
    "(report/b_crit.csv)."
)


def sweep(res: Results, outdir: Path) -> list[Figure]:
    df = sweep_runs(res)
    figs: list[Figure] = []
    if df.empty:
        return figs
    for task, g in df.groupby("task"):
        pts, cap = sweep_points(g)
        if pts.empty:
            continue
        noise = noise_scales(g)
        targets = _finite(g["sweep_target"])
        tgt = f" (target {targets[0]:g})" if len(targets) else ""
        title = f"{task}: critical-batch sweep — epochs to target vs batch{tgt}"
        from reports.speed.critical import describe
        from reports.speed.sweep import fit_points

        fits = fit_points(g, task, res)
        path = _sweep_plot(pts, cap, noise, title, outdir / f"sweep_{_slug(task)}.png", fits)
        note = "" if len(noise) else " No AdaScale run recorded a noise scale: no B_simple line."
        for r in fits[fits["degenerate"].astype(bool)].itertuples():
            note += f" {SWEEP_METHODS.get(r.method, r.method)}: {describe(r)}; no line drawn."
        figs.append(Figure("sweep", task, path, SWEEP_CAPTION + note))
    return figs

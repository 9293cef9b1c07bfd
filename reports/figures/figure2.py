"""Figure kind `gain`: the paper's Figure 2, the online gain against offline estimates at kept checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from bench.algo.rules import title
from bench.files import OFFLINE_GAIN

from ..collect import Results
from .style import STYLE, Figure, _finite, _plot_series, _save, _thin


def _offline_points(res: Results, run_dir: str) -> pd.DataFrame | None:
    """(iteration, tau, offline_gain, gain_lo, gain_hi, batches) of a run's offline_gain.csv (the interval
    only where it was written); None (with a warning) when unusable."""
    path = Path(run_dir) / OFFLINE_GAIN
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        res.warn(f"skipped {path}: {type(e).__name__}: {e}")
        return None
    if not {"tau", "offline_gain"} <= set(df.columns):
        res.warn(f"skipped {path}: no tau and offline_gain columns")
        return None
    df[["tau", "offline_gain"]] = df[["tau", "offline_gain"]].apply(pd.to_numeric, errors="coerce")
    df = df.dropna(subset=["tau", "offline_gain"])
    return df if not df.empty else None


def online_at(train: pd.DataFrame, points: pd.DataFrame) -> np.ndarray:
    """The online gain at each offline point: the record of its iteration (or the last before it)."""
    if train.empty or not {"iteration", "gain"} <= set(train.columns) or "iteration" not in points:
        return np.full(len(points), np.nan)
    d = train[["iteration", "gain"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    its, gains = d["iteration"].to_numpy(float), d["gain"].to_numpy(float)
    idx = np.searchsorted(its, pd.to_numeric(points["iteration"], errors="coerce").to_numpy(float), side="right") - 1
    return np.where(idx >= 0, gains[np.clip(idx, 0, None)] if len(gains) else np.nan, np.nan)


def gap_text(online: np.ndarray, points: pd.DataFrame) -> str:
    """'online − offline: mean −0.42, 3 of 8 outside the offline 95 % interval' (what the gap is: noise,
    where the online gain lies inside the offline interval, or lag/bias where it lies outside)."""
    off = points["offline_gain"].to_numpy(float)
    ok = np.isfinite(online) & np.isfinite(off)
    if not ok.any():
        return "online − offline: –"
    text = f"online − offline: mean {np.mean(online[ok] - off[ok]):+.2f}"
    if {"gain_lo", "gain_hi"} <= set(points.columns):
        lo, hi = (pd.to_numeric(points[c], errors="coerce").to_numpy(float) for c in ("gain_lo", "gain_hi"))
        have = ok & np.isfinite(lo) & np.isfinite(hi)
        if have.any():
            out = int(((online < lo) | (online > hi))[have].sum())
            text += f", {out} of {int(have.sum())} outside the offline 95 % interval"
    return text


def gain(res: Results, outdir: Path) -> list[Figure]:
    """Online gain against τ with the offline estimates (95 % jackknife intervals) at the kept checkpoints,
    one panel per run, the online − offline gap printed in each."""
    df = res.runs
    if df.empty:
        return []
    df = df[[(Path(d) / OFFLINE_GAIN).exists() for d in df["run_dir"]]]
    panels = []
    for _, r in df.sort_values(["task", "method", "seed", "run_dir"]).iterrows():
        points = _offline_points(res, r["run_dir"])
        if points is not None:
            panels.append((r, points))
    if not panels:
        return []
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    gaps, bars = [], False
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.6 * rows), squeeze=False, constrained_layout=True)
        for ax in axes.ravel()[len(panels) :]:
            ax.set_visible(False)
        for ax, (r, points) in zip(axes.ravel(), panels, strict=False):
            train, _ = res.metrics(r["run_dir"])
            _plot_series(ax, _thin(train), "gain", color="tab:blue", lw=1.8, label="online (moving averages)")
            n = _finite(points["batches"]) if "batches" in points else np.array([])
            label = f"offline ({int(n[0])} batches)" if len(n) else "offline"
            g = points["offline_gain"].to_numpy(float)
            if {"gain_lo", "gain_hi"} <= set(points.columns):
                lo, hi = (pd.to_numeric(points[c], errors="coerce").to_numpy(float) for c in ("gain_lo", "gain_hi"))
                yerr = np.vstack([np.clip(g - lo, 0, None), np.clip(hi - g, 0, None)])
                yerr = np.where(np.isfinite(yerr), yerr, 0.0)
                bars |= bool(np.isfinite(lo).any())
                label += ", 95 % jackknife interval"
            else:
                yerr = None
            ax.errorbar(points["tau"], g, yerr=yerr, fmt="o", color="tab:red", ms=6, capsize=4, label=label, zorder=3)
            s = pd.to_numeric(pd.Series([r["scale"]]), errors="coerce").iloc[0]
            if np.isfinite(s):
                ax.axhline(s, color="black", lw=0.8, ls=":", label=f"S = {s:g}")
            gap = gap_text(online_at(train, points), points)
            gaps.append(f"{r['task']} seed {r['seed']}: {gap}")
            ax.set_ylim(0, ax.get_ylim()[1] * 1.05)
            ax.set_xlabel("scale-invariant iterations τ")
            ax.set_ylabel("gain r")
            variant = f" [{res.variants.get(r['variant'], r['variant'])}]" if r["variant"] else ""
            ax.set_title(
                f"{r['task']} {title(r['method'])} S={r['scale']} seed {r['seed']}{variant}\n{gap}", fontsize=11
            )
            ax.legend(loc="lower right")
        fig.suptitle("Online gain against offline estimates at kept checkpoints (paper Figure 2)")
        path = _save(fig, outdir / "gain_online_offline.png")
    caption = (
        "Line: the gain AdaScale used at each iteration, from its moving averages of σ² and μ². Points: the "
        "gain from σ², μ² estimated afresh at the kept checkpoint's weights over independent micro-batches "
        "(adascale-bench gain)"
        + (
            ", with its 95 % delete-one-group jackknife interval over the micro-batches"
            if bars
            else " (no interval: offline_gain.csv written before it had gain_lo / gain_hi)"
        )
        + ". The online estimate averages over about 1000/S past iterations, so it lags while the gain "
        "moves: an online gain outside the offline interval is lag or bias, inside it noise. " + "; ".join(gaps) + "."
    )
    return [Figure("gain", f"{len(panels)} run(s)", path, caption)]

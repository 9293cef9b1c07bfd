"""Figure kind `curves`: per task and method, metric, training loss, lr (AdaScale: also gain and B_simple)
against τ, one band per scale."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reports.figures import render
from reports.figures.bands import Curve, _band_plan, _draw_plan_band, band_plan, curve_of, eval_band, smoothed
from reports.figures.render import _inputs
from reports.figures.style import STYLE, Figure, _log_if_positive, _save, _scale_colors, _slug, thin_index
from reports.rundata.collect import Results, rule_rows, scale_order, task_info
from reports.rundata.guards import float_columns
from reports.stats.noise import PER_EPOCH, trajectory
from reports.tables.table2 import table_runs
from reports.verdicts.warmup import WARMUP_RISE, WARMUP_START, WARMUP_WINDOW, run_warmups


def warmup_caption(res: Results, g: pd.DataFrame) -> str:
    """What the AdaScale runs' gain did over the first 10 % of τ, per S, written from the data (finding iv),
    and why it cannot say where the data cannot tell."""
    per_scale: dict[str, list] = {}
    why: list[str] = []
    for r, w in run_warmups(res, g):
        if w.holds is not None:
            per_scale.setdefault(r["scale"], []).append(w)
        elif w.why and w.why not in why:
            why.append(w.why)
    if not per_scale:
        return f" Whether the gain warms up cannot be told here ({'; '.join(why) or 'no gain records'}; finding iv)."
    parts = []
    for s, ws in sorted(per_scale.items(), key=lambda kv: scale_order(kv[0])):
        start, end = np.mean([w.start for w in ws]), np.mean([w.end for w in ws])
        held = sum(bool(w.holds) for w in ws)
        verdict = (
            "starts well below where it settles and rises: a warm-up emerges"
            if held == len(ws)
            else "does not start well below where it settles and rise: no emergent warm-up"
            if held == 0
            else f"warms up in {held} of {len(ws)} runs"
        )
        parts.append(f"S = {s}: {start:.2f} → {end:.2f} ({verdict})")
    return (
        f" AdaScale's normalised gain (r − 1)/(r̂ − 1), r̂ the steady gain of the run's late noise scale, over the "
        f"first {WARMUP_WINDOW:.0%} of τ, start and end averaged over the seeds — " + "; ".join(parts) + f" (warm-up: "
        f"start ≤ {WARMUP_START:g}, rise ≥ {WARMUP_RISE:g}; finding iv)."
    )


def _noise_band(res: Results, runs: pd.DataFrame) -> dict | None:
    """B_simple against τ over the seeds of one scale (reports.stats.noise.trajectory of each run), as a plan's band."""
    curves = []
    for _, r in runs.iterrows():
        m = float(pd.to_numeric(r.get(PER_EPOCH), errors="coerce")) if PER_EPOCH in r else math.inf
        tau, b = trajectory(res.metrics(r["run_dir"])[0], float(r["batch_size"]), m if m == m else math.inf)
        at = thin_index(len(tau))
        curves.append(curve_of(tau[at], b[at]))
    return band_plan(curves)


def _seed(train: pd.DataFrame) -> dict[str, np.ndarray]:
    """One seed's training columns a curves figure draws, thinned as a line is (`_thin`)."""
    at, columns = thin_index(len(train)), float_columns(train)
    return {k: columns[k][at] for k in ("tau", "loss", "lr", "gain") if k in columns and not train.empty}


def _curves(trains: list[dict[str, np.ndarray]], key: str, smooth: bool = False) -> list[Curve | None]:
    """Each seed's (τ, key) curve (`curve_of`); None where it lacks either; the loss `smoothed` first."""
    return [
        curve_of(c["tau"], smoothed(c[key]) if smooth else c[key]) if "tau" in c and key in c else None for c in trains
    ]


CURVE_PANELS = {  # key: (title, y label); gain and noise scale only for a rule that uses the gain (its `uses_gain`)
    "metric": ("validation metric", ""),
    "loss": ("training loss (smoothed)", "loss"),
    "lr": ("learning rate", "lr"),
    "gain": ("gain", "gain r"),
    "B_simple": ("gradient-noise scale B_simple = b·σ²/μ²", "B_simple (examples)"),
}


def _series(res: Results, picked: list, colors: dict, ada: bool) -> list[tuple]:
    """Per scale of one figure: its label (S, seeds, diverged), colour, the bands of every panel (mean over seeds
    with a min–max band: the metric, the smoothed training loss, the lr and, for a rule that reads the gain, the
    gain and the noise scale it measured) and the S·b line of the noise panel."""
    series = []
    for s, metrics, runs in picked:
        n_div = int((runs["status"] == "diverged").sum())
        seeds = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}" + (f", {n_div} diverged" if n_div else "")
        label_s = f"S = {s} ({seeds})"
        trains = [_seed(t) for t, _ in metrics]
        bands = {
            "metric": _band_plan(eval_band([e for _, e in metrics])),
            "loss": band_plan(_curves(trains, "loss", smooth=True)),
            "lr": band_plan(_curves(trains, "lr")),
        }
        hline = None
        if ada:
            bands["gain"] = band_plan(_curves(trains, "gain"))
            bands["B_simple"] = _noise_band(res, runs)
            b = pd.to_numeric(runs["batch_size"], errors="coerce").dropna()
            if bands["B_simple"] is not None and len(b) and float(s) >= 2:
                hline = float(s) * float(b.iloc[0])
        bands = {k: v for k, v in bands.items() if v is not None}
        series.append((label_s, tuple(float(c) for c in colors[s]), bands, hline))
    return series


def curves(res: Results, outdir: Path) -> list[Figure]:
    """Metric, training loss and lr against τ per task and method — for AdaScale also its gain and the
    noise scale B_simple it measured: per fixed scale the mean over seeds with a min–max band. Each
    figure is computed here as a plan of plain data (the bands) and drawn by `_draw_curves` through the
    renderer (skipped when the same plan was drawn before)."""
    df = table_runs(res.runs)
    df = df[df["scale"].map(lambda s: scale_order(s)[0] == 0)] if not df.empty else df
    figs: list[Figure] = []
    if df.empty:
        return figs
    for (task, preset, variant, method), g in df.groupby(["task", "preset", "variant", "method"], dropna=False):
        if g["shared_s1"].all():  # only the shared S = 1 run: the method has no curves of its own
            continue
        row = rule_rows(g)[str(method)]  # a user's rule as its specs recorded it: its title, whether it uses the gain
        name = f"{task}{f' [{res.variants.get(variant, variant)}]' if variant else ''}: {row.title}"
        path = outdir / f"curves_{_slug(task, preset, res.variants.get(variant, variant), method)}.png"
        inputs = _inputs("curves", g)
        caption = render.current().reuse(path, inputs)
        if caption is not None:  # drawn from these very runs and metrics files before: kept as it is
            figs.append(Figure("curves", name, path, caption, variant))
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        scales = sorted(g["scale"].unique(), key=scale_order)
        picked = []
        for s in scales:
            runs = g[(g["scale"] == s) & g["has_metrics"].astype(bool)]
            if len(runs):
                picked.append((s, [res.metrics(d) for d in runs["run_dir"]], runs))
        if not picked:
            continue
        ada = row.uses_gain  # the gain and the noise scale it measures: every rule that reads the gain
        keys = list(CURVE_PANELS) if ada else ["metric", "loss", "lr"]
        series = _series(res, picked, _scale_colors([s for s, _, _ in picked]), row.uses_gain)
        if not any(bands for _, _, bands, _ in series):
            continue
        arrow = "higher" if higher else "lower"
        what = "metric, training loss, lr, gain and B_simple" if ada else "metric, training loss and lr"
        plan = {
            "keys": keys,
            "ylabels": {k: f"{label} ({arrow} is better)" if k == "metric" else CURVE_PANELS[k][1] for k in keys},
            "series": series,
            "suptitle": f"{name} — {what} against τ ({preset} preset)",
        }
        caption = (
            "Per scale S: the mean over seeds, with the band from the lowest to the highest seed, drawn only "
            "over the τ every seed reached; the validation metric averaged by evaluation index (the k-th "
            "evaluation of every seed); training loss smoothed (rolling mean over 5 % of the run); log axes "
            "but for the metric."
        )
        if ada:
            caption += (
                " B_simple: b·σ²/μ² of AdaScale's moving averages; the dashed line of each colour is that "
                "run's total batch S·b (LSW degrades in the paper only where S·b is past the noise scale)."
            )
            caption += warmup_caption(res, g)
        else:
            caption += f" No gain panel: {row.title} does not use the gain."
        render.current().submit(_draw_curves, plan, path, inputs, caption)
        figs.append(Figure("curves", name, path, caption, variant))
    return figs


def _draw_curves(plan: dict, path: Path) -> None:
    """One curves figure from its plan (see `curves`)."""
    keys = plan["keys"]
    with plt.rc_context(STYLE):
        shape, size = ((2, 3), (20, 9)) if len(keys) > 3 else ((1, 3), (20, 5))
        fig, grid = plt.subplots(*shape, figsize=size, constrained_layout=True)
        grid = grid.ravel()
        for ax in grid[len(keys) :]:
            ax.set_visible(False)
        axes = dict(zip(keys, grid, strict=False))
        for name, color, bands, hline in plan["series"]:
            for key, b in bands.items():
                _draw_plan_band(axes[key], b, color, name, "o" if key == "metric" else None)
            if hline is not None:
                axes["B_simple"].axhline(hline, color=color, lw=1, ls="--")
        for key, ax in axes.items():
            ax.set_title(CURVE_PANELS[key][0])
            ax.set_xlabel("scale-invariant iterations τ")
            ax.set_ylabel(plan["ylabels"][key])
            if key != "metric":
                _log_if_positive(ax)
        handles, labels = max((ax.get_legend_handles_labels() for ax in axes.values()), key=lambda hl: len(hl[0]))
        fig.legend(handles, labels, loc="outside right center", title="scale")
        fig.suptitle(plan["suptitle"])
        _save(fig, path)

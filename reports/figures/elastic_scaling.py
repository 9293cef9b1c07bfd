"""Figure kind `elastic`: scale, gain, lr and metric against τ of the elastic-up/down runs beside the
fixed-scale runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reports.figures.bands import _draw_band, band, eval_band
from reports.figures.style import STYLE, Figure, _log_if_positive, _save, _slug, _thin
from reports.rundata.collect import Results, rule_rows, scale_order, task_info
from reports.tables.table2 import table_runs

# Where AdaScale makes the curves coincide (the metric against τ, by design), a curve drawn over another hid it:
# elastic-down wide beneath, elastic-up dashed over it, the fixed-scale runs thin and dashed on top of both.
ELASTIC_STYLE = {
    "elastic-up": ("tab:red", {"lw": 2.2, "ls": (0, (5, 2)), "zorder": 3}),
    "elastic-down": ("tab:blue", {"lw": 3.6, "zorder": 2}),
}
FIXED_STYLE = {"lw": 1.2, "ls": "--", "zorder": 4}


def _seed_runs(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["has_metrics"].astype(bool) & g["status"].isin(("completed", "diverged"))]


def elastic(res: Results, outdir: Path) -> list[Figure]:
    """Scale, gain, lr and metric against τ for elastic runs against the fixed-scale runs: each the mean
    over its seeds (band: lowest to highest seed), over the τ every seed reached."""
    df = table_runs(res.runs)
    figs: list[Figure] = []
    if df.empty or not df["scale"].isin(("elastic-up", "elastic-down")).any():
        return figs
    for (task, preset, variant, method), g in df.groupby(["task", "preset", "variant", "method"], dropna=False):
        el = [(s, _seed_runs(g[g["scale"] == s])) for s in ("elastic-up", "elastic-down")]
        el = [(s, r) for s, r in el if len(r)]
        if not el:
            continue
        label, higher = task_info(task, next(iter(g["metric"].dropna()), None), g)
        fixed_scales = sorted((s for s in g["scale"].unique() if scale_order(s)[0] == 0), key=scale_order)
        fixed = [(s, _seed_runs(g[g["scale"] == s])) for s in fixed_scales]
        fixed = [(s, r) for s, r in fixed if len(r)]
        greys = {s: plt.get_cmap("Greys")(0.35 + 0.6 * i / max(len(fixed) - 1, 1)) for i, (s, _) in enumerate(fixed)}
        with plt.rc_context(STYLE):
            fig, axes = plt.subplots(2, 2, figsize=(15, 9), constrained_layout=True)
            axes = axes.ravel()
            keys = (("scale", "scale S"), ("gain", "gain r"), ("lr", "learning rate"), ("metric", label))
            lines = [(s, runs, greys[s], FIXED_STYLE) for s, runs in fixed]
            solo = {"ls": "-"} if len(el) == 1 else {}  # dashed only where another elastic curve may lie beneath
            lines += [(s, runs, ELASTIC_STYLE[s][0], ELASTIC_STYLE[s][1] | solo) for s, runs in el]
            for s, runs, color, kw in lines:
                metrics = [res.metrics(d) for d in runs["run_dir"]]
                name = f"{s if s in ('elastic-up', 'elastic-down') else f'S={s}'} (n={len(runs)})"
                trains = [_thin(t) for t, _ in metrics]
                for ax, (k, _) in zip(axes, keys, strict=True):
                    b = eval_band([e for _, e in metrics]) if k == "metric" else band(trains, k)
                    dots = "o" if k == "metric" and s in ELASTIC_STYLE else None  # a fixed run's would cover them
                    _draw_band(ax, b, color, name, dots, **kw)
            arrow = "higher" if higher else "lower"
            for ax, (k, ylabel) in zip(axes, keys, strict=True):
                ax.set_title({"metric": "validation metric"}.get(k, k))
                ax.set_xlabel("scale-invariant iterations τ")
                ax.set_ylabel(f"{ylabel} ({arrow} is better)" if k == "metric" else ylabel)
            _log_if_positive(axes[1])
            handles, labels = axes[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right center", title="runs (seeds)")
            shown = rule_rows(g)[str(method)].title  # a user's rule by the title its specs recorded
            name = f"{task}{f' [{res.variants.get(variant, variant)}]' if variant else ''}: {shown}"
            fig.suptitle(f"{name} — elastic scaling ({preset} preset)")
            short = res.variants.get(variant, variant)  # a file named as the page names it (reports.rundata.variants)
            path = _save(fig, outdir / f"elastic_{_slug(task, preset, short, method)}.png")
        figs.append(
            Figure(
                "elastic",
                name,
                path,
                "Elastic-up (red; dashed beside elastic-down) and elastic-down (blue, wide) against the fixed-scale "
                "runs (thin dashed grey, darker = larger S): each the mean over its seeds with the band from the "
                "lowest to the highest seed, over the τ every seed reached; the metric averaged by evaluation "
                "index. Where curves coincide (AdaScale's metric against τ), each is drawn over the wider one beneath "
                "it, so none is hidden.",
                variant,
            )
        )
    return figs

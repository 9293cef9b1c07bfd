"""The report's figures (matplotlib, Agg backend, PNG), each drawn from the run files only.

Kinds (each function returns the figures it wrote; no data -> an empty list, never an exception):
- `heatmaps`: per heat-map grid, the panels of the paper's Figure 5 side by side (S=1, AdaScale S=16,
  LSW S=16, scaled SGD S=16; whichever exist): a cell per grid point, coloured by its validation metric,
  over initial lr × total decrease (both log scale), one shared colour scale, the threshold as a red line
  along the cell edges between the cells that reach it and those that do not, each panel's T (mean
  iterations) in its title; each panel on its own lr axis when the grids differ (scaled SGD searches its
  own). Diverged points are marked × and take the worst colour.
- `curves`: per task and method, validation metric, training loss (smoothed), lr and gain against τ, per
  scale the mean over seeds with a min–max band: AdaScale's gain starts near 1 and rises — its emergent
  warm-up.
- `elastic`: per task and method, scale, gain, lr and metric against τ for the elastic-up/down runs,
  with the fixed-scale runs as thin dashed lines.
- `gain`: the paper's Figure 2, one panel per run folder that has offline_gain.csv (`adascale-bench
  gain`): the online gain of metrics.jsonl against τ, and the offline estimates at the kept checkpoints.
- `sweep`: per task, data epochs to reach the target against global batch (log–log), one line per
  method; points not reached (by every finished seed) are open markers at the epoch cap; the gradient
  noise scale (median over the sweep's AdaScale runs) is a vertical line, labelled a proxy (no series tunes
  its lr per batch: no critical batch is measured); each fit's B_crit says what it measures.
- `table2_efficiency`: per table of a task the paper's Table 2 has, the scaling efficiency T1 / (S · iterations)
  of each rule against S (log), ours (mean, the seeds' range) beside the paper's cells at the paper's own S,
  the cells that lost S = 1's quality (beyond the margin, or diverged) crossed on both sides. The page shows
  it under the scale-free table whose numbers it draws.
- `speedup`: per table, speed-up against S beside the ideal and the paper's, and AdaScale's efficiency beside
  finding (iii)'s prediction (the numbers of reports.speed.speedup).

Modules: `style` (house style, `Figure`, saving), `render` (the renderer and its plan cache), `bands` (mean
and band over seeds), one module per kind: `heatmap`, `curve`, `elastic_scaling`, `figure2` (gain),
`batch_sweep` (sweep), `shared_axis` (table2_efficiency), `speedup`. The public names are re-exported here.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from reports.figures.bands import band, eval_band  # noqa: E402
from reports.figures.batch_sweep import SWEEP_CAPTION, SWEEP_COLORS, sweep  # noqa: E402
from reports.figures.curve import CURVE_PANELS, curves, warmup_caption  # noqa: E402
from reports.figures.elastic_scaling import elastic  # noqa: E402
from reports.figures.figure2 import gain, gap_text  # noqa: E402
from reports.figures.heatmap import PANELS, heatmap_points, heatmaps  # noqa: E402
from reports.figures.render import CODE, INDEX_VERSION, Renderer, digest, rendering  # noqa: E402
from reports.figures.shared_axis import table2_efficiency  # noqa: E402
from reports.figures.speedup import SPEEDUP_CAPTION, speedup_figures  # noqa: E402
from reports.figures.style import MAX_POINTS, STYLE, Figure, _save, _slug  # noqa: E402

KINDS = {
    "heatmap": (heatmaps, "heat maps", "no heat-map runs (experiment kind 'heatmap') with a summary"),
    "curves": (curves, "metric, lr and gain against τ", "no Table 2 runs with metrics"),
    "elastic": (elastic, "elastic scaling", "no elastic-up/down runs with metrics"),
    "gain": (
        gain,
        "online against offline gain (paper Figure 2)",
        "no run folder with offline_gain.csv (keep_checkpoints_every, then adascale-bench gain RUN_DIR)",
    ),
    "sweep": (sweep, "critical-batch sweep", "no sweep runs (experiment kind 'sweep') with a summary"),
    "table2_efficiency": (  # drawn under the scale-free table (reports.build), the numbers it draws
        table2_efficiency,
        "Table 2 on a shared axis: scaling efficiency against S, ours beside the paper's",
        "no Table 2 runs of a task the paper's Table 2 has",
    ),
    "speedup": (
        speedup_figures,
        "speed-up against S and against the noise scale",
        "no completed Table 2 runs at a fixed S",
    ),
}

__all__ = [
    "CODE",
    "CURVE_PANELS",
    "INDEX_VERSION",
    "KINDS",
    "MAX_POINTS",
    "PANELS",
    "STYLE",
    "SPEEDUP_CAPTION",
    "SWEEP_CAPTION",
    "SWEEP_COLORS",
    "Figure",
    "Renderer",
    "_save",
    "_slug",
    "band",
    "curves",
    "digest",
    "elastic",
    "eval_band",
    "gain",
    "gap_text",
    "heatmap_points",
    "heatmaps",
    "rendering",
    "speedup_figures",
    "sweep",
    "table2_efficiency",
    "warmup_caption",
]

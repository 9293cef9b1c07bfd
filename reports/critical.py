"""The critical batch B_crit, with a bootstrap interval over seeds, wherever the report has steps to target
against batch: the logreg sweep (reports.sweep) and the fixed-S Table 2 cells' time to target
(reports.control). Both hand `fit_series` one row per run; `report/b_crit.csv` holds every fit.

Fit: McCandlish et al.'s (2018) steps–examples trade-off (S/S_min − 1)(E/E_min − 1) = 1, i.e. with E = S·B
S = S_min·(1 + B_crit/B), E_min = S_min·B_crit, fitted by least squares on log S (every point weighs by its
relative error) to the mean steps of each batch over its seeds, using the batches where every finished
seed reached the target; ≥ 3 such batches, else no fit. For a given B_crit the best log S_min is the mean
of log S − log(1 + B_crit/B), so the fit is one-dimensional in log B_crit: profiled on a grid (`GRID`
points from 1/1000 of the smallest batch to 1000 × the largest), then refined by
scipy.optimize.least_squares from the grid's best point.

Steps to target are only known to lie between the last evaluation that missed the target and the first
that reached it (the run's `window` of iterations): the fit takes each run's window midpoint.

Interval: a percentile bootstrap, `BOOT` replicates (numpy's generator seeded by 0: the same report every
build): each batch's seeds resampled with replacement, independently per batch (the runs at different
batches are different runs) after spreading them by sqrt(n/(n − 1)) about their mean (so that a
resampled mean varies as s²/n: the plain bootstrap's (n − 1)/n shortfall is a third at n = 3), each drawn
run's steps moved uniformly within its window (the sweep's seeds often cross the target between the same
two evaluations: a bootstrap of seeds alone then has no width), the means refitted on the grid (refined
by a parabola through the least point); [2.5 %, 97.5 %]. A replicate whose best B_crit is at the grid's
edge counts as 0 or inf. No interval where no batch has two seeds (nothing to resample): `seeds_max` says
so. Measured on data drawn from the trade-off (8 batches, log-normal noise of 5–20 % a run, no windows, 200
draws each): the interval held the true B_crit in 89–94 % of draws at 3 seeds a batch (82–87 % without
the spreading), 92–96 % at 5.

Degenerate: B_crit outside [smallest, largest fitted batch] means the data show no knee — steps flat in B
(the fixed-lr sweep: B_crit → 0) or ∝ 1/B throughout (B_crit → ∞); `degenerate` says which ("below the data",
"above the data"), the text prints the bound, and the figures draw no line for it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

BOOT = 1000
GRID = 1400  # log B_crit grid points over 7 + log(range) + 7 e-folds: steps of ~1.2 % in B_crit
EDGE = 1000.0  # the grid spans [min batch / EDGE, max batch × EDGE]
COLUMNS = [
    "source",
    "task",
    "variant",
    "method",
    "B_crit",
    "B_crit_lo",
    "B_crit_hi",
    "degenerate",
    "S_min",
    "E_min",
    "n_points",
    "seeds_min",
    "seeds_max",
    "batch_min",
    "batch_max",
    "rms_log",
]


def _grid(batch: np.ndarray) -> np.ndarray:
    return np.linspace(math.log(batch.min() / EDGE), math.log(batch.max() * EDGE), GRID)


def _profile(batch: np.ndarray, log_steps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Sum of squared log residuals at each grid value of log B_crit, log S_min at its best, for each row
    of `log_steps` (replicates × batches): (replicates × grid)."""
    f = np.log1p(np.exp(grid)[:, None] / batch[None, :])  # grid × batches
    r = log_steps[:, None, :] - f[None, :, :]
    r -= r.mean(axis=2, keepdims=True)
    return (r**2).sum(axis=2)


def fit_tradeoff(batch: np.ndarray, steps: np.ndarray) -> tuple[float, float, float]:
    """(S_min, E_min, rms) of S = S_min·(1 + B_crit/B) fitted to (batch, steps) on log S; B_crit = E_min/S_min,
    0 or inf where the best fit lies at the grid's edge (no knee in the data). rms: the residuals' root mean
    square in log S. NaNs with fewer than 3 positive points."""
    from scipy.optimize import least_squares

    batch, steps = np.asarray(batch, float), np.asarray(steps, float)
    ok = np.isfinite(batch) & np.isfinite(steps) & (batch > 0) & (steps > 0)
    batch, steps = batch[ok], steps[ok]
    if len(batch) < 3 or len(np.unique(batch)) < 3:
        return math.nan, math.nan, math.nan
    y = np.log(steps)
    grid = _grid(batch)
    k = int(np.argmin(_profile(batch, y[None, :], grid)[0]))
    if k in (0, len(grid) - 1):  # no knee: steps flat in B (B_crit → 0) or ∝ 1/B (B_crit → ∞)
        b_crit = 0.0 if k == 0 else math.inf
        f = np.log1p(b_crit / batch) if k == 0 else np.log(1.0 / batch)
        s_min = float(np.exp(np.mean(y - f)))
        rms = float(np.sqrt(np.mean((y - f - np.mean(y - f)) ** 2)))
        return (s_min, s_min * b_crit, rms) if k == 0 else (0.0, s_min, rms)  # steps·B = E_min constant

    def resid(p: np.ndarray) -> np.ndarray:
        return y - p[0] - np.log1p(np.exp(p[1]) / batch)

    start = np.array([float(np.mean(y - np.log1p(np.exp(grid[k]) / batch))), grid[k]])
    fit = least_squares(resid, start)
    s_min, b_crit = float(np.exp(fit.x[0])), float(np.exp(fit.x[1]))
    return s_min, s_min * b_crit, float(np.sqrt(np.mean(fit.fun**2)))


def b_crit_of(s_min: float, e_min: float) -> float:
    """E_min / S_min, with the edge cases of `fit_tradeoff` (S_min = 0: inf)."""
    if not (math.isfinite(s_min) and math.isfinite(e_min)):
        return math.nan
    return e_min / s_min if s_min > 0 else math.inf


def _refined(sse: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """log B_crit at each row's least `sse` on `grid`, refined by the parabola through it and its neighbours;
    -inf / inf where the least is at the grid's lower / upper edge."""
    k = np.argmin(sse, axis=1)
    inner = np.clip(k, 1, len(grid) - 2)
    rows = np.arange(len(sse))
    y0, y1, y2 = sse[rows, inner - 1], sse[rows, inner], sse[rows, inner + 1]
    curv = y0 - 2 * y1 + y2
    offset = np.where(curv > 0, 0.5 * (y0 - y2) / np.where(curv > 0, curv, 1.0), 0.0)
    out = grid[inner] + np.clip(offset, -1, 1) * (grid[1] - grid[0])
    out[k == 0], out[k == len(grid) - 1] = -math.inf, math.inf
    return out


def bootstrap(
    per_batch: list[np.ndarray], batch: np.ndarray, windows: list[np.ndarray] | None = None, reps: int = BOOT
) -> tuple[float, float]:
    """The 95 % percentile interval of B_crit over `reps` replicates: each batch's seeds (`per_batch`: steps of
    each seed, one array per batch) resampled with replacement after spreading them by sqrt(n/(n − 1)) about
    their mean, each drawn run's steps moved uniformly within ±half its evaluation window (`windows`, same
    shapes; 0 without); NaNs when no batch has two seeds."""
    if max(len(s) for s in per_batch) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(0)
    windows = windows or [np.zeros(len(s)) for s in per_batch]
    cols = []
    for s, w in zip(per_batch, windows, strict=True):
        n = len(s)
        spread = s.mean() + math.sqrt(n / (n - 1)) * (s - s.mean()) if n > 1 else s
        pick = rng.integers(n, size=(reps, n))
        cols.append((spread[pick] + (rng.random((reps, n)) - 0.5) * w[pick]).mean(axis=1))
    means = np.clip(np.column_stack(cols), 0.5, None)  # half a step: fewer cannot be
    grid = _grid(batch)
    b = np.exp(_refined(_profile(batch, np.log(means), grid), grid))
    lo, hi = np.quantile(b, [0.025, 0.975], method="inverted_cdf")  # order statistics: inf stays inf, not NaN
    return float(lo), float(hi)


def fit_series(runs: pd.DataFrame) -> dict | None:
    """One fit (COLUMNS less source/task/variant/method) from one series' runs: columns `batch`, `steps`
    (steps to target: the first evaluation that reached it; NaN where none did), `reached` (bool) and
    optionally `window` (iterations since the evaluation before: the target was crossed within them). A
    batch enters when every one of its runs reached. A run's steps are taken as its window's midpoint,
    steps − window/2 (the first evaluation that reached is late by up to a window), and the bootstrap draws
    them within the window, so the interval carries the evaluations' resolution as well as the seeds' spread.
    None with fewer than 3 such batches."""
    per_batch, windows, batches = [], [], []
    for batch, g in runs.groupby("batch"):
        steps = g["steps"].to_numpy(float)
        w = g["window"].to_numpy(float) if "window" in g else np.zeros(len(g))
        w = np.where(np.isfinite(w) & (w > 0), np.minimum(w, steps), 0.0)
        if len(g) and g["reached"].astype(bool).all() and np.isfinite(steps).all() and (steps > 0).all():
            per_batch.append(steps - w / 2)
            windows.append(w)
            batches.append(float(batch))
    if len(batches) < 3:
        return None
    batch = np.asarray(batches)
    s_min, e_min, rms = fit_tradeoff(batch, np.array([s.mean() for s in per_batch]))
    b = b_crit_of(s_min, e_min)
    lo, hi = bootstrap(per_batch, batch, windows)
    where = "below the data" if b < batch.min() else "above the data" if b > batch.max() else ""
    sizes = [len(s) for s in per_batch]
    return {
        "B_crit": b,
        "B_crit_lo": lo,
        "B_crit_hi": hi,
        "degenerate": where,
        "S_min": s_min,
        "E_min": e_min,
        "n_points": len(batch),
        "seeds_min": min(sizes),
        "seeds_max": max(sizes),
        "batch_min": float(batch.min()),
        "batch_max": float(batch.max()),
        "rms_log": rms,
    }


def describe(r: pd.Series | dict | object) -> str:
    """'B_crit = 712 [540, 1 020] (95 % bootstrap over 3 seeds a point)', or the degenerate bound."""
    get = r.get if isinstance(r, dict | pd.Series) else lambda k: getattr(r, k)
    b, lo, hi = get("B_crit"), get("B_crit_lo"), get("B_crit_hi")
    if get("degenerate") == "below the data":
        text = f"B_crit below the data (< {get('batch_min'):,.0f}: steps do not fall with the batch)"
    elif get("degenerate") == "above the data":
        text = f"B_crit above the data (> {get('batch_max'):,.0f}: steps fall as 1/batch throughout)"
    else:
        text = f"B_crit = E_min/S_min = {b:,.0f}"
    if math.isfinite(lo):
        seeds = get("seeds_min") if get("seeds_min") == get("seeds_max") else f"{get('seeds_min')}–{get('seeds_max')}"
        text += f" [95 % bootstrap {lo:,.0f}, {hi:,.0f}; {seeds} seeds a point]"
    else:
        text += " (one seed a point: no interval)"
    return text


def write_csv(fits: pd.DataFrame, path: Path) -> None:
    """report/b_crit.csv: COLUMNS, one row per fitted series (written even when empty: a header)."""
    from bench.files import atomic_write_bytes

    out = fits.reindex(columns=COLUMNS)
    atomic_write_bytes(path, out.to_csv(index=False, float_format="%.6g").encode(errors="backslashreplace"))

"""The steps–examples trade-off's B_crit, with a bootstrap interval over seeds and the fit's misfit, wherever
the report has steps to target against batch: the logreg sweep (reports.speed.sweep) and the fixed-S Table 2
cells' time to target (reports.speed.timetotarget). Both hand `fit_series` one row per run; `report/b_crit.csv` holds
every fit, with what it measures (`measures`: none is McCandlish et al.'s critical batch, which needs the lr
tuned at each batch; AdaScale's is its own noise scale read back) and whether it agrees with the other
source's fit of the same series (`agreement`).

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
by a parabola through the least point); [2.5 %, 97.5 %] (`B_crit_seeds_lo/hi`). A replicate whose best
B_crit is at the grid's edge counts as 0 or inf. No interval where no batch has two seeds (nothing to
resample): `seeds_max` says so. Measured on data drawn from the trade-off (8 batches, log-normal noise of
5–20 % a run, no windows, 200 draws each): it held the true B_crit in 89–94 % of draws at 3 seeds a batch
(82–87 % without the spreading), 92–96 % at 5.

That interval knows the seeds, not whether the curve fits: the smoke's sweep printed AdaScale 420
[412, 428] at rms_log 0.13 with systematic residuals. So the reported interval (`B_crit_lo/hi`) adds the
misfit in two ways. (1) A residual bootstrap: τ² = Σr²/(n − 2) less what the seeds explain
(`lack_of_fit`), and each replicate's log means get the fit's own residuals resampled, scaled to sd τ;
τ = 0 leaves the seeds' interval. (2) The halves: B_crit refitted on the lower and the upper half of the
batches; where they differ beyond the seeds (`_halves_differ`) the value depends on the range measured,
and the interval is stretched to hold both. On trade-off data (100 draws, 3 seeds, 5–20 % noise) (1)
held the truth in 92–93 % (seeds alone: 90–91 %), 94 % at 5 seeds, and (2) can only widen it; on steps
S_min(1 + (B_c/B)^0.6) (5 % noise; all-range refit 152, halves 76 and 404) the seeds' interval was
[141, 163] and the halves differed in every draw, the reported interval holding both.

Degenerate: B_crit outside [smallest, largest fitted batch] means the data show no knee — steps flat in B
(the fixed-lr sweep: B_crit → 0) or ∝ 1/B throughout (B_crit → ∞); `degenerate` says which ("below the data",
"above the data"), the text prints the bound, and the figures draw no line for it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.algo.rules import ADASCALE

BOOT = 1000
GRID = 1400  # log B_crit grid points over 7 + log(range) + 7 e-folds: steps of ~1.2 % in B_crit
HALVES_LEVEL = 0.99  # see _halves_differ: the level that gives the test its nominal size on the trade-off
EDGE = 1000.0  # the grid spans [min batch / EDGE, max batch × EDGE]
COLUMNS = [
    "source",
    "task",
    "variant",
    "method",
    "B_crit",
    "B_crit_lo",
    "B_crit_hi",
    "B_crit_seeds_lo",
    "B_crit_seeds_hi",
    "misfit_log",
    "B_crit_low_half",
    "B_crit_high_half",
    "halves_differ",
    "agrees",
    "measures",
    "target",
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
    of `log_steps` (replicates × batches): (replicates × grid). With y and f = log(1 + B_crit/B) centred
    over the batches (the best log S_min takes their means), Σ(y − f)² = Σy² − 2·y·f + Σf²: one matrix
    product instead of a replicates × grid × batches array (cancellation costs ~1e-14 of Σy², far below
    any replicate's misfit)."""
    f = np.log1p(np.exp(grid)[:, None] / batch[None, :])  # grid × batches
    f = f - f.mean(axis=1, keepdims=True)
    y = log_steps - log_steps.mean(axis=1, keepdims=True)
    sse = (y**2).sum(axis=1)[:, None] - 2 * y @ f.T + (f**2).sum(axis=1)[None, :]
    return np.maximum(sse, 0.0)


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


def _seed_draws(per_batch: list[np.ndarray], windows: list[np.ndarray], reps: int, rng) -> np.ndarray:
    """(reps × batches) resampled means: each batch's seeds drawn with replacement after spreading them by
    sqrt(n/(n − 1)) about their mean, each drawn run moved uniformly within ±half its window."""
    cols = []
    for s, w in zip(per_batch, windows, strict=True):
        n = len(s)
        spread = s.mean() + math.sqrt(n / (n - 1)) * (s - s.mean()) if n > 1 else s
        pick = rng.integers(n, size=(reps, n))
        cols.append((spread[pick] + (rng.random((reps, n)) - 0.5) * w[pick]).mean(axis=1))
    return np.clip(np.column_stack(cols), 0.5, None)  # half a step: fewer cannot be


def lack_of_fit(resid: np.ndarray, log_draws: np.ndarray) -> float:
    """τ, the sd in log steps of the points about the curve beyond what seeds and windows explain: the
    residual variance on n − 2 degrees of freedom (two parameters fitted) less the mean variance of a
    batch's log mean over the seed draws, floored at 0 (a method-of-moments estimate, as DerSimonian and
    Laird's between-study variance). Pure seed noise leaves E[Σ r²] ≈ (n − 2)·mean(v): τ ≈ 0."""
    n = len(resid)
    if n <= 2:
        return 0.0
    v = np.var(log_draws, axis=0, ddof=1)
    return math.sqrt(max(0.0, float(np.sum(resid**2)) / (n - 2) - float(np.mean(v))))


def _split(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Indices of the lower and the upper half of the batches, each ≥ 3 (None under 6 batches)."""
    n = len(batch)
    order = np.argsort(batch)
    return (order[: n // 2], order[n - n // 2 :]) if n >= 6 else None


def _halves_differ(batch: np.ndarray, log_draws: np.ndarray, grid: np.ndarray) -> bool:
    """Whether B_crit refitted on the upper half of the batches differs from the lower half's beyond the
    seeds and windows: the HALVES_LEVEL percentile interval of log(B_high/B_low) over the seed draws
    excludes 0 by more than a grid step. On the trade-off both halves estimate one B_crit; a curve the data
    do not follow gives each half its own (the issue's sweep: 212 on 32–256, 1 049 on 512–4 096). Level
    0.99, not 0.95: at 3 seeds a point the percentile intervals undercover (above: 90–91 % at 95 %), and on
    trade-off data (8 batches, 80 draws) the 95 % test rejected 9–10 % of draws, the 99 % one 2.5–3.75 %
    (5 % and 20 % noise a run); on steps S_min(1 + (B_c/B)^α), α = 0.6 or 0.8, 5 % noise, it rejected 20 of
    20 either way."""
    split = _split(batch)
    if split is None:
        return False
    low, high = (_refined(_profile(batch[k], log_draws[:, k], grid), grid) for k in split)
    with np.errstate(invalid="ignore"):
        ratio = high - low  # ±inf where a half's best lies at the grid's edge; nan where both do alike
    ratio = ratio[~np.isnan(ratio)]
    if not len(ratio):
        return False
    q_lo, q_hi = np.quantile(ratio, [(1 - HALVES_LEVEL) / 2, (1 + HALVES_LEVEL) / 2], method="inverted_cdf")
    step = grid[1] - grid[0]  # the refined grid's own error is below a step: no difference within it
    return bool(q_lo > step or q_hi < -step)


def _interval(b: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(b, [0.025, 0.975], method="inverted_cdf")  # order statistics: inf stays inf, not NaN
    return float(lo), float(hi)


def intervals(
    per_batch: list[np.ndarray],
    batch: np.ndarray,
    windows: list[np.ndarray] | None = None,
    resid: np.ndarray | None = None,
    reps: int = BOOT,
) -> dict[str, float]:
    """B_crit_lo/hi (seeds, windows and the misfit), B_crit_seeds_lo/hi (seeds and windows alone) and
    misfit_log (τ, `lack_of_fit` of the fit's log residuals `resid`): 95 % percentile intervals over `reps`
    replicates. The misfit's replicates add to each seed draw's log means a residual bootstrap of the fit's
    own residuals, centred and scaled to sd τ (their pattern kept, their size what the seeds leave
    unexplained), so a fit with systematic residuals gets a wide interval and one on the curve keeps the
    seeds' interval (τ = 0: the same replicates). NaNs when no batch has two seeds."""
    keys = ("B_crit_lo", "B_crit_hi", "B_crit_seeds_lo", "B_crit_seeds_hi")
    if max(len(s) for s in per_batch) < 2:
        return dict.fromkeys(keys, math.nan) | {"misfit_log": math.nan, "halves_differ": False}
    rng = np.random.default_rng(0)
    windows = windows or [np.zeros(len(s)) for s in per_batch]
    log_draws = np.log(_seed_draws(per_batch, windows, reps, rng))
    grid = _grid(batch)
    refit = lambda y: np.exp(_refined(_profile(batch, y, grid), grid))  # noqa: E731
    seeds = _interval(refit(log_draws))
    tau = lack_of_fit(np.zeros(len(batch)) if resid is None else np.asarray(resid, float), log_draws)
    pool = np.zeros(1) if resid is None else resid - resid.mean()
    if tau > 0 and np.any(pool != 0):
        pool *= tau / math.sqrt(float(np.mean(pool**2)))
    misfit = log_draws + pool[rng.integers(len(pool), size=log_draws.shape)] if tau > 0 else log_draws
    both = _interval(refit(misfit)) if tau > 0 else seeds
    out = dict(zip(keys, (*both, *seeds), strict=True)) | {"misfit_log": tau}
    return out | {"halves_differ": _halves_differ(batch, log_draws, grid)}


def bootstrap(
    per_batch: list[np.ndarray], batch: np.ndarray, windows: list[np.ndarray] | None = None, reps: int = BOOT
) -> tuple[float, float]:
    """The 95 % percentile interval of B_crit over seeds and windows alone (`intervals`' B_crit_seeds_lo/hi)."""
    out = intervals(per_batch, batch, windows, reps=reps)
    return out["B_crit_seeds_lo"], out["B_crit_seeds_hi"]


def halves(batch: np.ndarray, means: np.ndarray) -> dict[str, float]:
    """B_crit refitted on the lower and the upper half of the batches (`_split`; NaNs under 6 batches)."""
    split = _split(batch)
    if split is None:
        return {"B_crit_low_half": math.nan, "B_crit_high_half": math.nan}
    low, high = (b_crit_of(*fit_tradeoff(batch[k], means[k])[:2]) for k in split)
    return {"B_crit_low_half": low, "B_crit_high_half": high}


def _widened(interval: dict, half: dict) -> dict:
    """The interval, stretched to hold both halves' refits where they differ beyond the seeds (the fitted
    value then depends on the range measured: the interval says which values the data support)."""
    if interval.pop("halves_differ"):
        values = [interval["B_crit_lo"], interval["B_crit_hi"], half["B_crit_low_half"], half["B_crit_high_half"]]
        interval |= {"B_crit_lo": min(values), "B_crit_hi": max(values)}
        return interval | half | {"halves_differ": True}
    return interval | half | {"halves_differ": False}


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
    means = np.array([s.mean() for s in per_batch])
    s_min, e_min, rms = fit_tradeoff(batch, means)
    b = b_crit_of(s_min, e_min)
    resid = np.log(means) - np.log(s_min + e_min / batch)  # S = S_min + E_min/B: the edge cases too
    where = "below the data" if b < batch.min() else "above the data" if b > batch.max() else ""
    sizes = [len(s) for s in per_batch]
    return {
        "B_crit": b,
        **_widened(intervals(per_batch, batch, windows, resid), halves(batch, means)),
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
    """'B_crit = 420 [95 % bootstrap with the misfit 150, 1 100; seeds alone 412, 428; 3 seeds a point]', or
    the degenerate bound."""
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
        s_lo, s_hi, tau = get("B_crit_seeds_lo"), get("B_crit_seeds_hi"), get("misfit_log")
        if isinstance(tau, float) and tau > 0:
            text += f" [95 % bootstrap {lo:,.0f}, {hi:,.0f} with the misfit (τ = {tau:.2g} in log steps);"
            text += f" seeds alone {s_lo:,.0f}, {s_hi:,.0f}; {seeds} seeds a point]"
        else:
            text += f" [95 % bootstrap {lo:,.0f}, {hi:,.0f}; no misfit beyond the seeds; {seeds} seeds a point]"
    else:
        text += " (one seed a point: no interval)"
    return text + _halves_note(get)


def _halves_note(get) -> str:
    """Where the halves' refits differ beyond the seeds (`_halves_differ`): their values, and that the
    interval was stretched to hold them."""
    if not get("halves_differ"):
        return ""
    low, high = get("B_crit_low_half"), get("B_crit_high_half")
    return (
        f"; the lower and upper half of the batches give {low:,.0f} and {high:,.0f}, apart beyond the seeds:"
        " the value depends on the range measured (the interval holds both)"
    )


def measures(source: str, method: str) -> str:
    """What a fit's B_crit is, by how its lr was set. McCandlish et al.'s critical batch is the knee of the
    trade-off with the lr tuned at each batch; no series here tunes it. AdaScale at a steady gain
    r = S(B/b + 1)/(B/b + S) advances τ by r an iteration, so reaching the target at τ* takes
    τ*/r = τ*/(1 + B/b)·(1 + B/(S·b)) steps: the trade-off with S_min = τ*/(1 + B/b) and B_crit = B, its
    own noise scale (B_simple, varying over training: a steps-weighted average of it)."""
    if method == ADASCALE:
        return "its noise scale read back, not a critical batch"
    if source == "sweep" and method == "fixed":
        return "one lr at every batch, not tuned per batch: not a critical batch"
    return "the lr its rule sets, not tuned per batch: not a critical batch"


NO_CRITICAL = (
    "No critical batch was measured: McCandlish et al.'s B_crit is the knee with the lr tuned at each batch, "
    "and no series here tunes it (fixed lr, linear scaling, AdaScale and the Table 2 rules set theirs)."
)


def _bounds(r: pd.Series) -> tuple[float, float]:
    """A fit's interval, its point where it has none."""
    lo, hi = float(r["B_crit_lo"]), float(r["B_crit_hi"])
    return (lo, hi) if math.isfinite(lo) and not math.isnan(hi) else (float(r["B_crit"]), float(r["B_crit"]))


def agreement(fits: pd.DataFrame) -> pd.Series:
    """`agrees` per fit: against every other source's fit of the same task, variant, method and target,
    "yes" where all their intervals (with the misfit) overlap, else "no: <source> <B_crit> [lo, hi]" naming
    those it misses; "" where no other source fitted the same series. Two fits of one curve share its
    B_crit: 95 % intervals that do not overlap disagree beyond both (a conservative test: overlapping ones
    may still differ)."""
    out = pd.Series("", index=fits.index, dtype=object)
    if fits.empty:
        return out
    key = fits[["task", "variant", "method"]].astype(str).agg("|".join, axis=1)
    key += "|" + pd.to_numeric(fits["target"], errors="coerce").map(lambda t: f"{t:.9g}")
    for i, r in fits.iterrows():
        others = fits[(key == key[i]) & (fits["source"] != r["source"])]
        if others.empty:
            continue
        lo, hi = _bounds(r)
        miss = [o for _, o in others.iterrows() if max(lo, _bounds(o)[0]) > min(hi, _bounds(o)[1])]
        out[i] = (
            "yes"
            if not miss
            else "no: "
            + "; ".join(
                f"{o['source']} {o['B_crit']:,.0f} [{o['B_crit_lo']:,.0f}, {o['B_crit_hi']:,.0f}]" for o in miss
            )
        )
    return out


def write_csv(fits: pd.DataFrame, path: Path) -> None:
    """report/b_crit.csv: COLUMNS, one row per fitted series (written even when empty: a header)."""
    from bench.core.files import atomic_write_bytes
    from reports.rundata.guards import csv_safe

    out = csv_safe(fits.reindex(columns=COLUMNS))  # no cell a formula
    atomic_write_bytes(path, out.to_csv(index=False, float_format="%.6g").encode(errors="backslashreplace"))

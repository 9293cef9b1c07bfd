"""Finding (iii)'s judge (issue 53.1–3): each fixed-S AdaScale run against the run its reference predicts, the
reference being the gradient moments at the run's own kept weights measured apart from the engine's statistics
(offline_gain.csv's ref_* columns, bench.run.independent): on logreg the exact oracle over the items the
iteration draws from (those left in the epoch's permutation), elsewhere the offline estimate through torch.func.
Other runs of the engine (reports.stats.noise.predict's donors) add evidence only.

**The prediction.** The reference points (τ_k; σ², μ², tr C², GᵀCG) are interpolated in τ (`interpolate`)
onto PARTS equal windows of [0, T1) and the engine's estimator is simulated around them REPLICAS times
(bench.core.algo.predict.simulated_runs: per iteration Gaussian draws of var̂ and sqr̂ with the spreads the moments
imply, μ̂² lowered by σ²/M for drawing without replacement, both clamped as the engine clamps them, folded into
the moving average): the mean over replicas of log iterations and of the gain's mean log over each third of τ
is the prediction, their spread one run's spread as the model sees it.

**The error model** of a cell (one S, its n seeds), per statistic, on log(measured/predicted):
tol = sqrt(spread² + ref² + order²) with spread = 1.96·sd (n = 1) or t_{0.975, n−1}·max(sd, the seeds' sd)/√n;
ref the reference's band (the deterministic prediction, bench.core.algo.predict.gain_path on `engine_moments`,
from σ² ± 1.96 se and μ² ∓ 1.96 se, se joining the estimate's (0 for the oracle) and the interpolation's
between kept points, `_between`); order the size of the draw-order correction (the prediction with against
without σ²/M), what the model of drawing without replacement may still miss. A cell holds where every
statistic's mean offset lies within its tol; does not hold otherwise.

**Power.** The multipliers c on B (σ² × c) a run could follow and still pass: c whose predicted statistics all
lie within tol of c = 1's. A cell whose offset lies past tol does not hold, whatever its power (a weak test never
hides a miss the data shows); else a range reaching past [POWER_LO, POWER_HI]: not testable here (no power);
where a gain stuck at S (linear scaling) lies as near the prediction as following B × c for some c in
[POWER_LO, POWER_HI] would (within that reach plus tol), or no power where S·b ≤ B/10 at every reference point:
not testable (S·b ≪ B: AdaScale equals linear scaling here).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from bench.core.algo.predict import engine_moments, gain_path, iterations_following, simulated_runs
from bench.core.files import OFFLINE_GAIN
from reports.rundata.collect import Results
from reports.stats import lagmatch, noise

PARTS = 1000  # windows of τ the reference is interpolated onto (early on the moments change within a few τ)
THIRDS = 3  # the gain is judged on its mean over each third of τ
POWER_LO, POWER_HI = 0.8, 1.25  # a cell whose passing multipliers on B reach past these has no power
Z95 = 1.96
SMALL_SHARE = 10  # S·b ≪ B: S·b at most a tenth of B (the steady gain ≥ 0.9·S at any S ≤ 128)
REPLICAS = 64  # simulated runs per prediction
MULTIPLIERS = np.unique(
    np.exp(
        np.concatenate([np.linspace(math.log(0.25), math.log(4.0), 13), np.linspace(math.log(0.8), math.log(1.25), 21)])
    )
)  # c on B: the power's grid
COVERS = 0.8  # a reference judges a run only where its kept points reach this share of T1 (past its last point the
# interpolation holds the moments flat: a reference kept over the warm-up window alone, `until` 0.1, predicts nothing)
REF = ("ref_var", "ref_sqr", "ref_var_se", "ref_sqr_se", "ref_trace_sq", "ref_spread")
DRAWN = "ref_drawn"  # 1 where the point's moments are those the engine's draws there expect (bench.run.independent)


@dataclass(frozen=True)
class Points:
    """A run's reference points, sorted by τ, and which reference it is."""

    tau: np.ndarray
    values: np.ndarray  # points × REF
    source: str  # "exact" (the task's oracle) or "offline" (torch.func at kept weights)


def points(res: Results, run_dir: str, per_epoch: float = math.inf) -> Points | None:
    """The run's reference from its offline_gain.csv (None where it has no file, or no ref_* columns), every
    point as the population's moments: a point over the items left in the epoch (ref_drawn 1) holds the μ² its
    draws expect, ‖G_R‖² − tr Σ_R/|R|, to which σ²/M is added back (engine_moments takes it off again)."""
    if not os.path.lexists(Path(run_dir) / OFFLINE_GAIN):
        return None
    df = lagmatch.offline_points(res, run_dir)
    if df is None or any(c not in df for c in REF):
        return None
    df = df.dropna(subset=["tau", *REF]).sort_values("tau")
    if df.empty:
        return None
    exact = bool((df["ref_var_se"] == 0).all() and (df["ref_sqr_se"] == 0).all())
    values = df[list(REF)].to_numpy(float, copy=True)
    if DRAWN in df and math.isfinite(per_epoch) and per_epoch > 0:
        values[:, 1] += np.where(df[DRAWN].to_numpy(float) == 1, values[:, 0] / per_epoch, 0.0)
    tau = df["tau"].to_numpy(float)
    for j, se in ((0, 2), (1, 3)):  # the interpolation's error between kept points joins the estimate's
        values[:, se] = np.hypot(values[:, se], _between(tau, values[:, j]) / Z95)
    return Points(tau, values, "exact" if exact else "offline")


LOCAL = 5  # kept points over which the interpolation's misses are averaged


def _between(tau: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The reference's error between kept points: how far `interpolate` misses each kept point from its two
    neighbours (leave one out: a gap twice as wide, an upper bound where the moments are smooth), signed and
    averaged over LOCAL neighbouring points — the moving average the gain takes sees the local mean, so an
    oscillation from one iteration to the next (weights at the edge of stability) cancels where the points are
    dense, while a curvature the points are too sparse for (the first iterations) stays. What even spacing
    aliases (an oscillation of period 2 seen at one phase only) no interpolation can tell: keep weights at
    every iteration, or at an odd spacing (docs/design.md, finding (iii))."""
    n = len(v)
    if n < 3:
        return np.zeros(n)
    miss = [v[k] - interpolate(tau[k : k + 1], tau[[k - 1, k + 1]], v[[k - 1, k + 1]])[0] for k in range(1, n - 1)]
    signed = np.concatenate([miss[:1], miss, miss[-1:]])
    w = min(LOCAL, n)
    return np.abs(np.convolve(signed, np.ones(w) / w, mode="same"))


@dataclass(frozen=True)
class Predicted:
    """A prediction: log iterations and the gain's mean log over each third of τ (`logs`), with the model's
    run-to-run spread of each (`sd`, 0 for a deterministic path)."""

    logs: np.ndarray
    sd: np.ndarray


def _profile(p: Points, T1: float, c: float, shift: float) -> np.ndarray:
    """(σ², μ², tr C², GᵀCG) on PARTS windows of τ: σ² × c (tr C² × c², GᵀCG × c), σ² up and μ² down by
    `shift` × 1.96 standard errors."""
    grid = (np.arange(PARTS) + 0.5) * T1 / PARTS
    v = np.stack([interpolate(grid, p.tau, p.values[:, j]) for j in range(len(REF))], axis=1)
    return np.stack(
        [c * (v[:, 0] + shift * Z95 * v[:, 2]), v[:, 1] - shift * Z95 * v[:, 3], c * c * v[:, 4], c * v[:, 5]], 1
    )


def predict(p: Points, scale: int, T1: float, per_epoch: float, c: float = 1.0, shift: float = 0.0) -> Predicted:
    """The deterministic prediction (bench.core.algo.predict.gain_path on the engine's mean view of each window,
    `engine_moments`) of a run at scale S following the reference with σ² × c, moved by `shift` errors."""
    var, sqr = engine_moments(*_profile(p, T1, c, shift).T, scale, per_epoch)
    taus, gains = gain_path(list(zip(var.tolist(), sqr.tolist(), strict=True)), scale, T1)
    logs = np.append(math.log(len(taus)), thirds_of(taus, gains, T1)) if len(taus) else np.full(THIRDS + 1, math.nan)
    return Predicted(logs, np.zeros(THIRDS + 1))


def simulate(p: Points, scale: int, T1: float, per_epoch: float) -> Predicted:
    """The mean and spread of the engine's runs around the reference (bench.core.algo.predict.simulated_runs)."""
    counts, thirds = simulated_runs(_profile(p, T1, 1.0, 0.0), scale, T1, per_epoch, REPLICAS, thirds=THIRDS)
    logs = np.column_stack([np.log(counts), thirds])
    return Predicted(np.nanmean(logs, axis=0), np.nanstd(logs, axis=0, ddof=1))


def interpolate(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """fp at x: log-linear where the values are all positive (the moments fall by orders of magnitude between two
    early kept points, and a straight line between them overstates μ² in between), else linear; the ends held."""
    if len(fp) and np.all(fp > 0):
        return np.exp(np.interp(x, xp, np.log(fp)))
    return np.interp(x, xp, fp)


def thirds_of(tau: np.ndarray, gain: np.ndarray, T1: float) -> np.ndarray:
    """The τ-weighted mean of log gain over each third of [0, T1) (each iteration weighs its gain: its τ-length)."""
    out = np.full(THIRDS, math.nan)
    ok = np.isfinite(tau) & np.isfinite(gain) & (gain > 0)
    k = np.clip(np.floor(tau[ok] / T1 * THIRDS), 0, THIRDS - 1)
    for j in range(THIRDS):
        w = gain[ok][k == j]
        if len(w):
            out[j] = float(np.sum(w * np.log(w)) / np.sum(w))
    return out


@dataclass(frozen=True)
class RunJudged:
    """One run: its measured statistics, the prediction, the reference band and the modelled bias (all logs)."""

    measured: np.ndarray  # log iterations, then the gain's mean log per third
    predicted: np.ndarray  # the simulated runs' mean
    spread: np.ndarray  # the simulated runs' standard deviation: one run's spread, as the model sees it
    ref_band: np.ndarray  # half-width of the reference's band, per statistic
    model: np.ndarray  # the draw order's size (the prediction with against without its correction)
    power: np.ndarray  # per multiplier in MULTIPLIERS: predicted statistics at c (rows)
    linear: np.ndarray  # the statistics of a gain stuck at S
    source: str
    own: float = math.nan  # log(the predictor on the run's own folded statistics / its iterations): `own_count`
    small: bool = False  # S·b ≤ B/10 at every reference point (σ² ≥ 10·S·μ²): the paper's S·b ≪ B


def covers(p: Points, T1: float) -> bool:
    """Whether the reference's kept points reach COVERS of T1 (else it says nothing of the rest of the run)."""
    return bool(len(p.tau)) and float(p.tau[-1]) >= COVERS * T1


def judge_run(p: Points, train: pd.DataFrame, its: float, scale: int, T1: float, per_epoch: float) -> RunJudged | None:
    """The run's statistics beside the prediction from its reference; None where either is missing."""
    step = "progress" if "progress" in train.columns else "gain"  # the τ the iteration advanced: its multiplier
    if train.empty or not {"tau", step} <= set(train.columns) or not its > 0:
        return None
    t = train[["tau", step]].apply(pd.to_numeric, errors="coerce").dropna()
    measured = np.append(math.log(its), thirds_of(t["tau"].to_numpy(float), t[step].to_numpy(float), T1))
    base = predict(p, scale, T1, per_epoch)
    if not np.isfinite(base.logs).all():
        return None
    sim = simulate(p, scale, T1, per_epoch)
    lo, hi = predict(p, scale, T1, per_epoch, shift=-1.0), predict(p, scale, T1, per_epoch, shift=1.0)
    unordered = predict(p, scale, T1, math.inf)  # the draw order's size: without the correction for it
    band = np.maximum(np.abs(lo.logs - base.logs), np.abs(hi.logs - base.logs))
    power = np.stack([predict(p, scale, T1, per_epoch, c=c).logs for c in MULTIPLIERS])
    linear = np.append(math.log(math.ceil(T1 / scale)), np.full(THIRDS, math.log(scale)))
    model = np.abs(base.logs - unordered.logs)
    own = math.log(own_count(train, scale, T1) / its)
    small = bool(np.all(p.values[:, 0] >= SMALL_SHARE * scale * p.values[:, 1]))
    return RunJudged(
        measured, sim.logs, sim.sd, band, model, power - base.logs + sim.logs, linear, p.source, own, small
    )


OWN_PARTS = 1000  # windows of τ for `own_count`: fine enough that a window's mean is its iterations' own


def own_count(train: pd.DataFrame, scale: int, T1: float) -> float:
    """The predictor (bench.core.algo.predict.iterations_following) on what the run's engine folded
    (reports.stats.noise.folded of its records at its S, per OWN_PARTS windows). A check of the predictor, not
    of the run: it reproduces the count (0.0 % on the control's logreg runs) where the former profile (corrected,
    clamped per tenth of τ) missed by +3.5 … +10.6 % (issue 53.3)."""
    if train.empty or scale < 2 or "scale" not in train.columns:
        return math.nan
    prof = noise.folded(train[pd.to_numeric(train["scale"], errors="coerce") == scale], T1, OWN_PARTS)
    return iterations_following(prof, scale, T1) if prof is not None else math.nan


@dataclass(frozen=True)
class Cell:
    """One S's verdict: 'holds', 'fails', 'no power', or 'linear' (S·b ≪ B)."""

    verdict: str
    offset: np.ndarray  # mean over seeds of log(measured/predicted), per statistic
    tol: np.ndarray
    c_range: tuple[float, float]
    seeds: int
    source: str
    own: float = math.nan  # mean over seeds of RunJudged.own


def judge_cell(runs: list[RunJudged]) -> Cell:
    """The error model and the power of one S from its seeds' runs (module docstring)."""
    n = len(runs)
    d = np.stack([r.measured - r.predicted for r in runs])
    offset = np.nanmean(d, axis=0)
    source = "exact" if all(r.source == "exact" for r in runs) else "offline"
    sd = np.nanmean([r.spread for r in runs], axis=0)  # the model's run-to-run spread
    if n >= 2:  # the seeds' own spread where it is larger
        spread = float(stats.t.ppf(0.975, n - 1)) * np.maximum(np.nanstd(d, axis=0, ddof=1), sd) / math.sqrt(n)
    else:
        spread = Z95 * sd
    ref = np.nanmean([r.ref_band for r in runs], axis=0)
    model = np.nanmean([r.model for r in runs], axis=0)
    resolution = np.zeros(len(offset))
    its = math.exp(float(np.nanmean([r.predicted[0] for r in runs])))
    resolution[0] = -math.log1p(-1 / its) if its > 1 else math.inf  # one iteration either side: log(p/(p − 1))
    tol = np.sqrt(spread**2 + ref**2 + model**2 + resolution**2)
    base = np.nanmean([r.predicted for r in runs], axis=0)
    curve = np.nanmean([r.power for r in runs], axis=0)  # multipliers × statistics
    passing = np.all(np.abs(curve - base) <= tol, axis=1)
    c_range = (float(MULTIPLIERS[passing].min()), float(MULTIPLIERS[passing].max())) if passing.any() else (1.0, 1.0)
    linear = np.nanmean([r.linear for r in runs], axis=0)
    plausible = (MULTIPLIERS >= POWER_LO) & (MULTIPLIERS <= POWER_HI)  # B known to ±25 %: what following it allows
    reach = np.max(np.abs(curve[plausible] - base), axis=0)
    no_power = c_range[0] < POWER_LO or c_range[1] > POWER_HI
    if np.all(np.abs(linear - base) <= reach + tol) or (no_power and all(r.small for r in runs)):
        verdict = "linear"  # linear scaling as near as B × 0.8 … 1.25 would be, or no power where S·b ≪ B
    elif not np.all(np.abs(offset) <= tol):
        verdict = "fails"  # a miss past the error model fails even where the test is weak: no gate hides it
    else:
        verdict = "no power" if no_power else "holds"
    own = [r.own for r in runs if math.isfinite(r.own)]
    return Cell(verdict, offset, tol, c_range, n, source, float(np.mean(own)) if own else math.nan)


def describe(scale: str, cell: Cell) -> str:
    """'S = 16 (exact reference, 3 seeds): iterations +1.2 % (tol ±3.0 %), gain by third −0.5/+0.1/+0.3 % (tol …);
    passes for c ∈ [0.91, 1.10]: holds'."""

    def pct(x: float) -> str:
        return f"{math.expm1(x):+.1%}" if math.isfinite(x) else "–"

    def tol(x: float) -> str:
        return f"±{math.expm1(x):.1%}" if math.isfinite(x) else "–"

    gain = "/".join(pct(x) for x in cell.offset[1:])
    gtol = "/".join(tol(x) for x in cell.tol[1:])
    c = f"c ∈ [{cell.c_range[0]:.2f}, {cell.c_range[1]:.2f}]" if math.isfinite(cell.c_range[0]) else "c –"
    return (
        f"S = {scale} ({cell.source} reference, {cell.seeds} seed{'s' if cell.seeds != 1 else ''}): iterations "
        f"{pct(cell.offset[0])} (tol {tol(cell.tol[0])}), gain by third of τ {gain} (tol {gtol}); passes for {c}; "
        f"the predictor on the run's own folded statistics {pct(cell.own)}"
    )

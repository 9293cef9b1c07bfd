"""How many iterations AdaScale takes at scale S, given the gradient-noise scale over training: the one
prediction finding (iii) judges runs against (reports/verdicts/reference.py: from the moments at the run's own kept
weights, through `engine_moments` / `simulated_runs` below; reports/stats/noise.py's prediction from the other runs'
statistics is printed beside it as evidence) and that a plan made before the runs can use (`advise`; a profile
of σ², μ² alone — unknown spreads — steps `simulated_runs` as `iterations_following` does).

**The model.** The task's noise is a profile over the scale-invariant clock: in each of k equal windows of
τ ∈ [0, T1) the per-micro-batch moments (σ²_j, μ²_j) (b·σ²_j/μ²_j is the window's noise scale B_j). An
AdaScale run whose gain follows that profile folds, iteration by iteration, the moments of the window its τ
is in into the estimator's own moving average (bench.core.algo.gain.UnbiasedGain: clamp, θ = max(1 − S/1000, 0),
the bias correction), takes the gain r = (v̂ + q̂)/(v̂/S + q̂) of what the average holds — at a constant
noise scale the steady gain S(B/b + 1)/(B/b + S) — and advances τ by it; it stops at τ ≥ T1. The average's
lag is part of the prediction: a run's gain trails a noise scale that rises within one memory (1000/S
iterations), and so does the prediction's.

**Closed form within a window.** With the inputs (x, y) constant, k updates of one average at a constant θ
give raw_k = x + θ^k·(raw_0 − x) and Π θ = p_0·θ^k, so the bias-corrected values are
(x + θ^k(raw_0 − x)) / (1 − p_0·θ^k). Both averages share that denominator, so it cancels in the gain:
with d = raw_0 − x,

    r_k = (x_v + x_q + θ^k·(d_v + d_q)) / (x_v/S + x_q + θ^k·(d_v/S + d_q)),

two multiply-adds and a division per iteration. The iterations of one window are evaluated as arrays: a
window of a paper run (T1/10 ≈ 4 000 iterations at S = 1) costs one numpy pass, not a Python loop of its
iterations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import ndtr

from .gain import VAR_FLOOR, theta

CHUNK = 65_536  # iterations evaluated at once within a window
ROWS = 64  # profiles stepped side by side: at most ROWS × CHUNK × 2 numbers at once (64 MiB)
MAX_ITERATIONS_PER_T1 = 100  # a guard: the gain is ≥ 1, so a run needs at most ⌈T1⌉ iterations


def iterations_following(profile: Sequence[tuple[float, float]], scale: int, T1: float) -> float:
    """The iterations of an AdaScale run at a fixed scale S whose gain follows the noise `profile`: (σ², μ²)
    of each of len(profile) equal windows of τ ∈ [0, T1) (module docstring). NaN where S < 2, T1 is not a
    positive finite number, or a window's moments are not finite."""
    return float(iterations_following_each([profile], scale, T1)[0])


def iterations_following_each(profiles: Sequence[Sequence[tuple[float, float]]], scale: int, T1: float) -> np.ndarray:
    """`iterations_following` of each profile at one S and T1, the profiles stepped side by side: each row
    evaluates its own chunk of its own window, with the same elementwise operations and the same sequential
    cumsum as a profile alone, so each count is the one it would get alone (tests/algo/test_predict.py). A
    report predicts every run from the ~35 donors of its table at the run's S and T1: one pass, not 35."""
    out = np.full(len(profiles), math.nan)
    if scale < 2 or not (math.isfinite(T1) and T1 > 0):
        return out
    ok = [i for i, p in enumerate(profiles) if len(p) and all(math.isfinite(a) and math.isfinite(b) for a, b in p)]
    for k in {len(profiles[i]) for i in ok}:  # one pass per number of windows (a report's are all 10)
        same = [i for i in ok if len(profiles[i]) == k]
        for start in range(0, len(same), ROWS):
            rows = same[start : start + ROWS]
            out[rows] = _stepped(np.asarray([profiles[i] for i in rows], dtype=float), int(scale), T1)
    return out


def _stepped(profile: np.ndarray, scale: int, T1: float) -> np.ndarray:
    """The iterations of each row of `profile` (rows × windows × (σ², μ²), all finite), window by window."""
    rows, k = profile.shape[:2]
    th = theta(scale)
    x_all = np.stack([np.maximum(profile[:, :, 0], VAR_FLOOR), np.maximum(profile[:, :, 1], 0.0)], axis=2)
    raw, prod = np.zeros((rows, 2)), np.ones(rows)  # the averages' raw sums and Π θ: no update yet
    tau, iterations, end = np.zeros(rows), np.zeros(rows, dtype=np.int64), T1 * (1 - 1e-9)
    live = np.ones(rows, dtype=bool)
    while (live := live & (tau < end) & (iterations < MAX_ITERATIONS_PER_T1 * T1)).any():
        at = np.flatnonzero(live)
        j = np.minimum((tau[at] / T1 * k).astype(np.int64), k - 1)
        boundary = np.minimum(T1 * (j + 1) / k, end)
        x = x_all[at, j]  # clamped as the engine does
        n = _chunk(x, raw[at], prod[at], scale, boundary - tau[at])
        powers = _powers(th)[: int(n.max())]
        d = raw[at] - x
        num = np.multiply.outer(d[:, 0] + d[:, 1], powers)  # the gain (v̂ + q̂)/(v̂/S + q̂), bias correction cancelled
        num += (x[:, 0] + x[:, 1])[:, None]
        den = np.multiply.outer(d[:, 0] / scale + d[:, 1], powers)
        den += (x[:, 0] / scale + x[:, 1])[:, None]
        taus = np.cumsum(np.divide(num, den, out=num), axis=1)
        taus += tau[at, None]
        m = np.minimum((taus < boundary[:, None]).sum(axis=1) + 1, n)  # iterations taken (τ rises: first crossing)
        last = powers[m - 1]
        raw[at] = x + last[:, None] * (raw[at] - x)
        prod[at] *= last
        tau[at], iterations[at] = taus[np.arange(len(at)), m - 1], iterations[at] + m
    return iterations.astype(float)


@functools.lru_cache(maxsize=64)
def _powers(th: float) -> np.ndarray:
    """θ¹ … θ^CHUNK, computed once per θ (the same values as each window computing them again)."""
    out = th ** np.arange(1, CHUNK + 1, dtype=float)
    out.flags.writeable = False
    return out


def _chunk(x: np.ndarray, raw: np.ndarray, prod: np.ndarray, scale: int, left: np.ndarray) -> np.ndarray:
    """How many iterations each row evaluates at once in a window with `left` of τ to go: enough to cross it at
    the smaller of the gain now and the window's steady gain (the gain moves between the two), at most CHUNK.
    Any n ≥ 1 gives the same count (a window not crossed goes on in the next chunk); a good one spares computing
    the tens of thousands of iterations a gain of 1 would need when the gain is near S."""

    def gain(v: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            den = v[:, 0] / scale + v[:, 1]
            return np.where(den > 0, (v[:, 0] + v[:, 1]) / np.where(den > 0, den, 1.0), 1.0)

    with np.errstate(divide="ignore", invalid="ignore"):
        now = np.where(prod < 1.0, gain(raw / (1.0 - prod[:, None])), math.inf)
    rate = np.maximum(1.0, np.minimum(now, gain(x)))
    return np.minimum(CHUNK, np.maximum(1.0, np.ceil(left / rate) + 1)).astype(np.int64)


# windows of τ for `folded_profile`: a run's own count reproduced within 2 % (advise's probes; median 0.5 % over 87
# logreg and user-model runs, 4.7 % at worst, against 2.3 % at 1 000 windows), at a cost a report at the paper's
# volume bears: a prediction steps window by window, and 1 000 windows made (iii)'s 21 000 predictions 17 s of a
# 26 s report (docs/performance.md)
FOLDED_PARTS = 100


def folded_profile(
    tau: np.ndarray, var: np.ndarray, sqr: np.ndarray, T1: float, parts: int = FOLDED_PARTS
) -> tuple[tuple[float, float], ...] | None:
    """What an AdaScale run's engine folded, as a profile `iterations_following` takes: the mean over each of
    `parts` equal windows of τ ∈ [0, T1) of its per-iteration (σ̂², μ̂²) (bench.core.algo.gain.moments of its S
    micro-batches) clamped as the engine clamps them (σ̂² ≥ VAR_FLOOR, μ̂² ≥ 0); a window without a record holds
    the one before, the first the first record's. None without a finite record.

    Why these and not the population's moments: the clamp raises the mean of μ̂² where its spread reaches below
    0 (late in training, and the more the smaller S), and drawing without replacement lowers it; the predictor
    on the population's (σ², μ²) missed the run's own count by −6 … +11 % (advise's probes, issue 54.1), on
    these by ≤ 2 % at FOLDED_PARTS (tests/reports/test_advice.py). Read at the probe's S, they carry its clamp to the
    other S predicted: advise's model error (reports.advice.model_error) holds what that costs."""
    tau, var, sqr = (np.asarray(a, float) for a in (tau, var, sqr))
    ok = np.isfinite(tau) & np.isfinite(var) & np.isfinite(sqr)
    if not ok.any() or not (math.isfinite(T1) and T1 > 0) or parts < 1:
        return None
    v = np.stack([np.maximum(var[ok], VAR_FLOOR), np.maximum(sqr[ok], 0.0)], axis=1)
    k = np.clip((tau[ok] / T1 * parts).astype(np.int64), 0, parts - 1)
    count = np.bincount(k, minlength=parts)
    sums = np.stack([np.bincount(k, weights=v[:, j], minlength=parts) for j in range(2)], axis=1)
    out, last = [], (float(v[0, 0]), float(v[0, 1]))
    for j in range(parts):
        if count[j]:
            last = (float(sums[j, 0] / count[j]), float(sums[j, 1] / count[j]))
        out.append(last)
    return tuple(out)


def speedup(iterations: float, T1: float) -> float:
    """T1 / iterations: how many times fewer iterations than S = 1 (NaN where either is not positive)."""
    return T1 / iterations if iterations > 0 and T1 > 0 else math.nan


# ------------------------------------------------------------------- the engine's view of given moments
#
# The prediction above folds each window's moments into the average as they are. The engine folds its own
# per-iteration estimates (bench.core.algo.gain.moments of S micro-batches), clamped: sqr̂ = mean_sq − var̂/S at 0.
# Two things then move the mean of what it folds off the population's (σ², μ²): drawing without replacement
# (E[sqr̂] = μ² − σ²/M, M = N/b micro-batches per epoch: bench.core.algo.gain's derivation) and the clamp
# (E[max(sqr̂, 0)] > E[sqr̂] wherever sqr̂'s spread reaches below 0, late in training where μ² is small). For
# Gaussian micro-batch gradients g_i ~ N(G, C), tr C = σ², the sample mean and the sample variance are
# independent, so
#     Var[sqr̂] = Var‖ḡ‖² + Var[var̂]/S² = 2 tr C²/S² + 4 GᵀCG/S + 2 tr C²/((S − 1) S²)
#              = 2 tr C²/(S(S − 1)) + 4 GᵀCG/S,
# and with sqr̂ ≈ N(m, v) (m = μ² − σ²/M): E[max(sqr̂, 0)] = m·Φ(m/√v) + √v·φ(m/√v). This is the predictor's
# modelled bias (issue 53.3): a prediction from moments measured apart from the engine (a task's exact oracle,
# or the offline estimate at kept weights) feeds these expected values, not the population's.


def engine_moments(
    var: Any, sqr: Any, trace_sq: Any, spread: Any, scale: int, per_epoch: float = math.inf
) -> tuple[Any, Any]:
    """The mean (σ̂², max(μ̂², 0)) the engine folds per iteration at scale S ≥ 2, given the population's σ² = `var`,
    μ² = `sqr` of one micro-batch, tr C² = `trace_sq` and GᵀCG = `spread` of its covariance C, and M = `per_epoch`
    micro-batches per epoch (inf: independent draws); numbers or numpy arrays of them. No spread (0 or NaN): no
    clamp modelled (the window mean is clamped as `iterations_following` does)."""
    var, sqr = np.asarray(var, float), np.asarray(sqr, float)
    m = sqr - (var / per_epoch if math.isfinite(per_epoch) and per_epoch > 0 else 0.0)
    v = 2.0 * np.asarray(trace_sq, float) / (scale * (scale - 1)) + 4.0 * np.asarray(spread, float) / scale
    ok = np.isfinite(v) & (v > 0) & (scale >= 2)
    s = np.sqrt(np.where(ok, v, 1.0))
    z = m / s
    clamped = m * ndtr(z) + s * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    out = np.where(ok, clamped, m)
    return (float(var), float(out)) if out.ndim == 0 else (var, out)


def gain_path(profile: Sequence[tuple[float, float]], scale: int, T1: float) -> tuple[np.ndarray, np.ndarray]:
    """(τ before, gain of) every iteration of the AdaScale run `iterations_following` counts: the same model,
    one iteration at a time (its length is that count: tests/algo/test_predict.py), for judging a run's
    logged gain over τ, not only its count (finding (iii)). Empty where the prediction is NaN."""
    k = len(profile)
    if scale < 2 or not (math.isfinite(T1) and T1 > 0) or not k:
        return np.zeros(0), np.zeros(0)
    if not all(math.isfinite(a) and math.isfinite(b) for a, b in profile):
        return np.zeros(0), np.zeros(0)
    th, end = theta(scale), T1 * (1 - 1e-9)
    x_all = [(max(a, VAR_FLOOR), max(b, 0.0)) for a, b in profile]
    raw_v = raw_q = 0.0
    taus, gains, tau = [], [], 0.0
    while tau < end and len(taus) < MAX_ITERATIONS_PER_T1 * T1:
        xv, xq = x_all[min(int(tau / T1 * k), k - 1)]
        raw_v, raw_q = th * raw_v + (1 - th) * xv, th * raw_q + (1 - th) * xq
        r = (raw_v + raw_q) / (raw_v / scale + raw_q)  # the bias correction cancels in the ratio
        taus.append(tau)
        gains.append(r)
        tau += r
    return np.asarray(taus), np.asarray(gains)


def draw_statistics(
    rng: np.random.Generator, var: np.ndarray, sqr: np.ndarray, trace_sq: np.ndarray, spread: np.ndarray, scale: int
) -> tuple[np.ndarray, np.ndarray]:
    """One iteration's (var̂, sqr̂) of S Gaussian micro-batch gradients g_i ~ N(G, C) for each element (tr C = `var`,
    ‖G‖² = `sqr`, tr C² = `trace_sq`, GᵀCG = `spread`): ḡ − G = e and the sample covariance are independent, and
    var̂ = Σ‖g_i − ḡ‖²/(S − 1),  sqr̂ = ‖G‖² + 2G·e + ‖e‖² − var̂/S,
    with the quadratic forms drawn as Satterthwaite's scaled χ² of d = (tr C)²/tr C² degrees of freedom per
    draw (their means and variances exact: ‖e‖² of mean tr C/S and variance 2 tr C²/S², var̂ of mean tr C and
    variance 2 tr C²/(S − 1)) and 2G·e normal of variance 4 GᵀCG/S. The shape matters: μ̂² is a difference of
    skewed terms, and the clamp's mean depends on its lower tail."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(trace_sq > 0, var * var / np.where(trace_sq > 0, trace_sq, 1.0), np.inf)
    finite = np.isfinite(d) & (d > 0)
    dd = np.where(finite, d, 1.0)
    e2 = np.where(finite, var / scale * rng.gamma(dd / 2, 2 / dd), var / scale)
    v = np.where(finite, var * rng.gamma((scale - 1) * dd / 2, 2 / ((scale - 1) * dd)), var)
    spread = np.where(np.isfinite(spread), spread, 0.0)  # unknown spreads (a profile of σ², μ² alone): no noise
    cross = rng.standard_normal(np.shape(var)) * np.sqrt(np.maximum(4.0 * spread / scale, 0.0))
    return v, sqr + cross + e2 - v / scale


def simulated_runs(
    profile: Sequence[tuple[float, float, float, float]],
    scale: int,
    T1: float,
    per_epoch: float = math.inf,
    replicas: int = 64,
    seed: int = 0,
    thirds: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """The engine's estimator run `replicas` times on draws around the moments of `profile` — (σ², μ², tr C²,
    GᵀCG) per equal window of τ ∈ [0, T1) — each iteration's var̂, sqr̂ drawn by `draw_statistics` (μ² lowered by
    σ²/M for drawing without replacement), each clamped as the engine clamps it, folded into the moving
    average, the gain taken and τ advanced by it. Returns (iterations per replica, the τ-weighted mean log gain
    over each of `thirds` equal parts of τ per replica): the model's mean and its run-to-run spread, the
    nonlinearity of the clamp and of the ratio of averages included. Deterministic for a `seed`."""
    p = np.asarray(profile, float)
    k = len(p)
    rng = np.random.default_rng(seed)
    th = theta(scale)
    offset = p[:, 0] / per_epoch if math.isfinite(per_epoch) and per_epoch > 0 else np.zeros(k)
    raw = np.zeros((replicas, 2))
    tau, count = np.zeros(replicas), np.zeros(replicas)
    wsum, wlog = np.zeros((replicas, thirds)), np.zeros((replicas, thirds))
    end, live = T1 * (1 - 1e-9), np.ones(replicas, dtype=bool)
    rows = np.arange(replicas)
    while (live := live & (tau < end) & (count < MAX_ITERATIONS_PER_T1 * T1)).any():
        j = np.minimum((tau / T1 * k).astype(np.int64), k - 1)
        var, sqr = draw_statistics(rng, p[j, 0], p[j, 1] - offset[j], p[j, 2], p[j, 3], scale)
        var, sqr = np.maximum(var, VAR_FLOOR), np.maximum(sqr, 0.0)
        new = th * raw + (1 - th) * np.stack([var, sqr], axis=1)
        raw = np.where(live[:, None], new, raw)
        r = (raw[:, 0] + raw[:, 1]) / (raw[:, 0] / scale + raw[:, 1])
        part = np.minimum((tau / T1 * thirds).astype(np.int64), thirds - 1)
        np.add.at(wsum, (rows[live], part[live]), r[live])
        np.add.at(wlog, (rows[live], part[live]), (r * np.log(r))[live])
        tau = np.where(live, tau + r, tau)
        count += live
    with np.errstate(invalid="ignore", divide="ignore"):
        return count, wlog / wsum

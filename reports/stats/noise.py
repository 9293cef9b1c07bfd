"""The gradient-noise scale B = b·σ²/μ² (McCandlish et al. 2018's B_simple) of each AdaScale run over
training: the one definition the findings read ((ii)'s regime, (iii)'s and (iv)'s r̂), the efficiency panel
and Table 2's notes use.

**Definition** (`windows`). B over a window of τ (fractions of T1: early [0, ⅓), middle [⅓, ⅔), late [⅔, 1]):

    B_w = b · Σ_t p_t·σ²_t / Σ_t p_t·μ²_t       over the iterations t whose τ_t lies in the window,

with σ²_t, μ²_t the per-iteration moments corrected for drawing without replacement
(bench.core.algo.gain.population_moments: the derivation is there; the engine cuts each iteration's S
micro-batches out of one epoch's permutation of N items, M = N/b per epoch, read from the run's summary as
its micro-batches over its epochs) and p_t the τ the iteration advanced (its τ-length: the difference of
consecutive records' τ, which also weighs a down-sampled frame's records right). Why so:
- *windows*, not one training average: B grows as training converges (smoke logreg S = 8: exact B 52 → 13 354);
  a ratio of sums over the whole run is dominated by early training, where μ² is large (the old average,
  337, was B at iteration 71 of 423);
- *weighted by τ*, not by iteration: AdaScale at a larger S takes fewer, longer iterations late in training
  (its gain is larger there), so an average over iterations leans further towards early training the larger
  S is — which made the old per-run values fall with S (smoke logreg: S = 2 465–554, S = 4 386–416, S = 8
  325–338). Weighted by τ, runs at any S weigh the same stretch of training alike;
- *corrected*: without it μ² is low by s²/N, and on the tiny sets (N = 1 000 … 20 000) B came out too large.
A task's noise scale is the median over its fixed-S AdaScale runs (S ≥ 2) of each window, printed as the
range over windows and runs. Finding (iii) predicts each run's iterations from the other runs' noise profiles
(`predict`, below).

**Trajectory** (the curves figure): b·σ²/μ² of the moving averages AdaScale recorded (`var`, `sqr`), else
those averages replayed with `UnbiasedGain` from sum_sq and mean_sq, with the same correction at ρ = 1.
**Training average** (`average`, summary.json's `B_simple`): kept for the record and for runs read by older
reports; no verdict reads it.

Metrics columns read: train `tau`, `iteration`, `scale`, `sum_sq`, `mean_sq`, `progress` (and `var`, `sqr`).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.core.algo import transfer
from bench.core.algo.gain import UnbiasedGain, b_simple, moments, pair_fraction, population_moments
from bench.core.algo.predict import FOLDED_PARTS, folded_profile, iterations_following, iterations_following_each
from bench.core.algo.rules import ADASCALE
from reports.rundata.collect import Results, scale_order
from reports.rundata.guards import float_columns, per_frame

COLUMN = "B_simple"  # the training average (summary.json), kept for the record
WINDOWS = (("early", 0.0, 1 / 3), ("middle", 1 / 3, 2 / 3), ("late", 2 / 3, 1.0))  # fractions of T1
WINDOW_COLUMNS = tuple(f"B_{name}" for name, _, _ in WINDOWS)  # a run's B per window, set by `fill`
PER_EPOCH = "per_epoch"  # a run's micro-batches per epoch M = N/b (inf: unknown, no correction), set by `fill`
READ = "_noise_read"  # whether `fill` has read the row's metrics (a column: it travels with the frame)


Stats = dict[str, np.ndarray]  # the columns of `_stats`, equally long
STATS_COLUMNS = ("tau", "iteration", "sum_sq", "mean_sq", "scale", "progress", "var", "sqr")


@per_frame
def _stats(train: pd.DataFrame) -> Stats:
    """sum_sq, mean_sq, scale of the training records that carry statistics (S ≥ 2), as float arrays, with
    `first`: the stream's micro-batch index at the start of each one's iteration (`_cursors`, over every
    record); {} where the frame has no statistics. Made once per frame (`fill`, the curves' noise panel and the
    findings each ask for a run's), as arrays: a frame's column lookups were most of the noise's time."""
    columns = float_columns(train)  # a name the frame holds twice is none of them: no statistics, not a crash
    if train.empty or not {"sum_sq", "mean_sq", "scale"} <= columns.keys():
        return {}
    d = {c: columns[c] for c in STATS_COLUMNS if c in columns}
    usable = np.isfinite(d["scale"]) & (d["scale"] >= 1)
    d = {c: v[usable] for c, v in d.items()}
    d["first"] = _cursors(d["scale"], d.get("iteration"))
    kept = np.isfinite(d["sum_sq"]) & np.isfinite(d["mean_sq"]) & (d["scale"] >= 2)
    return {c: v[kept] for c, v in d.items()}


def _n(d: Stats) -> int:
    """How many records `d` holds."""
    return len(d["scale"]) if d else 0


def _cursors(scale: np.ndarray, it: np.ndarray | None) -> np.ndarray:
    """The stream's micro-batch index at the start of each record's iteration: Σ S over the iterations before
    it (exact for a full frame; in a down-sampled one each record's S stands for the iterations up to the next;
    records without a usable iteration number count one iteration each)."""
    if not len(scale):
        return scale
    if it is None or not (np.isfinite(it).all() and (np.diff(it) > 0).all()):
        it = np.arange(len(scale), dtype=float)
    return np.concatenate([[it[0] * scale[0]], it[0] * scale[0] + np.cumsum(scale[:-1] * np.diff(it))])


def per_epoch(train: pd.DataFrame, epochs: float) -> float:
    """M = N/b, the run's micro-batches per epoch of data: the micro-batches it consumed (Σ S over its
    iterations, from its training records) over its epochs (summary.json); inf where either is unknown."""
    return _per_epoch(_stats(train), epochs)


def _per_epoch(d: Stats, epochs: float) -> float:
    if not _n(d) or not (math.isfinite(epochs) and epochs > 0):
        return math.inf
    total = float(d["first"][-1] + d["scale"][-1])
    m = total / epochs
    return float(round(m)) if abs(m - round(m)) <= 1e-6 * m else m


def _weights(d: Stats) -> np.ndarray:
    """Each record's τ-length: the τ up to the next record (the last one: its own progress)."""
    tau = d["tau"]
    last = float(d["progress"][-1]) if "progress" in d and np.isfinite(d["progress"][-1]) else math.nan
    if not math.isfinite(last):
        last = float(np.median(np.diff(tau))) if len(tau) > 1 else 1.0
    w = np.append(np.diff(tau), last)
    return np.where(np.isfinite(w) & (w > 0), w, 0.0)


def corrected(d: Stats, m: float) -> tuple[np.ndarray, np.ndarray]:
    """(σ²_t, μ²_t) of each record: its unbiased `moments`, corrected for drawing without replacement out of
    M = m micro-batches per epoch (bench.core.algo.gain.population_moments, with each iteration's pair share ρ)."""
    scale = d["scale"].astype(np.int64)
    var, sqr = moments(d["sum_sq"], d["mean_sq"], scale)
    if not math.isfinite(m):
        return var, sqr
    first = d["first"]
    rho = np.ones(len(first))
    straddle = np.isfinite(first) & (np.floor(first / m) != np.floor((first + scale - 1) / m))
    for i in np.flatnonzero(straddle):
        rho[i] = pair_fraction(int(first[i]), int(scale[i]), m)
    return population_moments(var, sqr, m, rho)


def window_moments(train: pd.DataFrame, T1: float, m: float, parts: int) -> list[tuple[float, float]]:
    """(σ², μ²) of each of `parts` equal windows of τ ∈ [0, T1]: the τ-weighted means Σ p_t·σ²_t / Σ p_t and
    Σ p_t·μ²_t / Σ p_t of the corrected per-iteration moments (`corrected`) of the iterations whose τ lies in
    it — the definition of the module docstring; (NaN, NaN) for a window without statistics."""
    return _window_moments(_stats(train), T1, m, parts)


def _window_moments(d: Stats, T1: float, m: float, parts: int) -> list[tuple[float, float]]:
    out = [(math.nan, math.nan)] * parts
    if not _n(d) or "tau" not in d or not (math.isfinite(T1) and T1 > 0):
        return out
    sigma2, mu2 = corrected(d, m)
    w = _weights(d)
    k = np.clip(np.floor(d["tau"] / T1 * parts), 0, parts - 1)
    ok = np.isfinite(sigma2 + mu2) & np.isfinite(k) & (w > 0)
    for j in range(parts):
        here = ok & (k == j)
        if here.any():
            total = float(np.sum(w[here]))
            out[j] = (float(np.sum(w[here] * sigma2[here])) / total, float(np.sum(w[here] * mu2[here])) / total)
    return out


def windows(train: pd.DataFrame, batch_size: float, T1: float, m: float) -> dict[str, float]:
    """B per third of τ (WINDOWS): b·σ²/μ² of `window_moments`; NaN for a window without statistics, inf where
    its μ² ≤ 0 (the gradient's mean not resolved above its noise)."""
    return _windows(_stats(train), batch_size, T1, m)


def _windows(d: Stats, batch_size: float, T1: float, m: float) -> dict[str, float]:
    out = dict.fromkeys(WINDOW_COLUMNS, math.nan)
    if not math.isfinite(batch_size):
        return out
    for col, (sigma2, mu2) in zip(WINDOW_COLUMNS, _window_moments(d, T1, m, len(WINDOWS)), strict=True):
        if math.isfinite(sigma2 + mu2):
            out[col] = b_simple(sigma2, mu2, batch_size)
    return out


PREDICTION_PARTS = 10  # (iii)'s prediction follows the noise scale per tenth of τ


def profile(train: pd.DataFrame, T1: float, m: float) -> tuple[tuple[float, float], ...] | None:
    """A run's noise profile: (σ², μ²) per tenth of τ (`window_moments`), what another run's prediction is fed
    (bench.core.algo.predict); None where a tenth has no statistics."""
    return _profile(_stats(train), T1, m)


def _profile(d: Stats, T1: float, m: float) -> tuple[tuple[float, float], ...] | None:
    parts = _window_moments(d, T1, m, PREDICTION_PARTS)
    return tuple(parts) if all(math.isfinite(a + b) for a, b in parts) else None


def folded(train: pd.DataFrame, T1: float, parts: int = FOLDED_PARTS) -> tuple[tuple[float, float], ...] | None:
    """What a run's engine folded (bench.core.algo.predict.folded_profile of its records' `moments`, uncorrected and
    clamped as the engine has them) per `parts` windows of τ: the profile a prediction of another run is fed —
    advise's from its probe, (iii)'s evidence from the other runs of a table — so that a run predicted from its
    own reproduces its count (reports.verdicts.reference.own_count checks that, finer)."""
    return _folded(_stats(train), T1, parts)


def _folded(d: Stats, T1: float, parts: int = FOLDED_PARTS) -> tuple[tuple[float, float], ...] | None:
    if not _n(d) or "tau" not in d:
        return None
    var, sqr = moments(d["sum_sq"], d["mean_sq"], d["scale"].astype(np.int64))
    return folded_profile(d["tau"], var, sqr, T1, parts)


def average(train: pd.DataFrame, batch_size: float) -> float:
    """The training average of B_simple of one run's training records (NaN without statistics)."""
    return _average(_stats(train), batch_size)


def _average(d: Stats, batch_size: float) -> float:
    if not _n(d) or not math.isfinite(batch_size):
        return math.nan
    return b_simple_average_of(d["sum_sq"], d["mean_sq"], d["scale"].astype(int), batch_size)


def b_simple_average_of(sum_sq: np.ndarray, mean_sq: np.ndarray, scale: Any, batch_size: float) -> float:
    """bench.core.algo.gain.b_simple_average over arrays: the same `moments` per record (elementwise, the same
    IEEE operations), summed in the same order (np.add.accumulate is sequential, not pairwise) and divided
    the same way, so equal to it bit for bit (tests/reports/test_noise_arrays.py) at numpy speed."""
    n = np.asarray(scale, dtype=np.int64)
    keep = (n >= 2) & np.isfinite(sum_sq) & np.isfinite(mean_sq)
    count = int(keep.sum())
    if not count:
        return math.nan
    var, sqr = moments(sum_sq[keep], mean_sq[keep], n[keep])
    return b_simple(float(np.add.accumulate(var)[-1]) / count, float(np.add.accumulate(sqr)[-1]) / count, batch_size)


def b_simple_of(var: np.ndarray, sqr: np.ndarray, batch_size: float) -> np.ndarray:
    """bench.core.algo.gain.b_simple of each (var, sqr): b·max(var, 0)/sqr, inf where sqr ≤ 0 (max(var, 0.0) is
    var unless var < 0, NaN included), equal to it bit for bit."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(sqr > 0, batch_size * np.where(var < 0.0, 0.0, var) / np.where(sqr > 0, sqr, 1.0), math.inf)


def trajectory(train: pd.DataFrame, batch_size: float, per_epoch: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """(τ, B_simple) after each iteration with statistics, where finite: what AdaScale's moving averages said,
    corrected for drawing without replacement out of `per_epoch` micro-batches per epoch (at ρ = 1; inf:
    uncorrected)."""
    d = _stats(train)
    if not _n(d) or not math.isfinite(batch_size) or "tau" not in d:
        return np.zeros(0), np.zeros(0)
    if {"var", "sqr"} <= d.keys() and np.isfinite(d["var"]).all() and np.isfinite(d["sqr"]).all():
        var, sqr = d["var"], d["sqr"]
    else:
        est, avgs = UnbiasedGain(), []
        for s, m, scale in zip(d["sum_sq"], d["mean_sq"], d["scale"].astype(int).tolist(), strict=True):
            est.update(float(s), float(m), scale)
            avgs.append((est.var_avg, est.sqr_avg))
        var, sqr = (np.asarray(c, float) for c in zip(*avgs, strict=True))
    values = np.asarray(b_simple_of(*population_moments(var, sqr, per_epoch), batch_size), float)
    finite = np.isfinite(values)
    return d["tau"][finite], values[finite]


def _wanted(runs: pd.DataFrame) -> pd.Series:
    """AdaScale runs whose largest S is ≥ 2: the ones that measure a noise scale."""
    if runs.empty:
        return pd.Series(False, index=runs.index)
    top = pd.to_numeric(runs["max_scale"], errors="coerce")
    return (runs["method"] == ADASCALE) & (top >= 2) & runs["status"].isin(("completed", "diverged"))


def fill(res: Results, workers: int = 1) -> pd.DataFrame:
    """res.runs with, for every AdaScale run with S ≥ 2: `B_simple` (the training average) where its summary
    lacks one, and for the completed ones `per_epoch` (M), the noise scale per window (`B_early`, `B_middle`,
    `B_late`: `windows`) and the noise profile per tenth of τ (`profile`), from its metrics.jsonl; then every
    fixed-S run's prediction from the other runs' profiles (`predict`, in `workers` processes where there are
    many). Idempotent."""
    runs = res.runs
    for col in (COLUMN, PER_EPOCH, PREDICTED, PREDICTED_LO, PREDICTED_HI, *WINDOW_COLUMNS):
        if col not in runs:
            runs[col] = math.nan
    for col in (PROFILE, FOLDED, PREDICTED_FROM, SMALL_BATCH):
        runs[col] = runs[col].astype(object) if col in runs else pd.Series(None, index=runs.index, dtype=object)
    wanted = _wanted(runs) & runs["has_metrics"].astype(bool)
    missing = ~np.isfinite(pd.to_numeric(runs[COLUMN], errors="coerce").to_numpy(float))
    unwindowed = pd.to_numeric(runs[PER_EPOCH], errors="coerce").isna() & (runs["status"] == "completed")
    if READ not in runs:  # which rows fill has read: a run whose average stays NaN is read once, not each call
        runs[READ] = False
    todo = runs.index[wanted & (missing | unwindowed) & ~runs[READ].fillna(False).astype(bool)]
    for i in todo:
        train, _ = res.metrics(runs.at[i, "run_dir"])
        d = _stats(train)  # once per run: every quantity below is read off it
        b = float(runs.at[i, "batch_size"])
        if missing[runs.index.get_loc(i)]:
            runs.at[i, COLUMN] = _average(d, b)
        if unwindowed[i]:
            m = _per_epoch(d, float(pd.to_numeric(runs.at[i, "epochs"], errors="coerce")))
            runs.at[i, PER_EPOCH] = m
            T1 = float(runs.at[i, "T1"])
            for col, v in _windows(d, b, T1, m).items():
                runs.at[i, col] = v
            runs.at[i, PROFILE] = _profile(d, T1, m)
            runs.at[i, FOLDED] = _folded(d, T1)
    runs.loc[todo, READ] = True
    if len(todo) or runs[PREDICTED_FROM].isna().all():  # new profiles, or none predicted yet: (re)predict
        runs = predict(runs, workers)
    res.runs = runs
    return runs


# ------------------------------------------------------------------- (iii)'s independent prediction

PROFILE = "profile"  # a run's (σ², μ²) per tenth of τ, set by `fill`: its noise scale where it is small (S·b ≪ B)
FOLDED = "folded"  # what its engine folded (`folded`), set by `fill`: what the prediction of another run reads
PREDICTED = "predicted_iterations"  # a fixed-S run's iterations as the other runs' noise predicts them
PREDICTED_LO, PREDICTED_HI = "predicted_lo", "predicted_hi"  # … the range over the donors' scales
PREDICTED_FROM = "predicted_from"  # which runs the prediction comes from, as printed
SMALL_BATCH = "small_batch"  # S·b ≤ SMALL_BATCH_SHARE × every tenth's noise scale (the paper's S·b ≪ B)
PREDICTION_COLUMNS = (PREDICTED, PREDICTED_LO, PREDICTED_HI, PREDICTED_FROM, SMALL_BATCH)
SMALL_BATCH_SHARE = 0.1  # "S·b ≪ B": at most a tenth of it, where the steady gain is ≥ 0.9·S (any S ≤ 128)


@dataclass(frozen=True)
class _Table:
    """One table's fixed-S AdaScale runs as arrays, for choosing donors and predicting each run (pandas' per-row
    indexing was most of the predictions' cost at paper volume)."""

    S: np.ndarray
    pilot: np.ndarray
    profiles: list[tuple[tuple[float, float], ...]]
    folded: list[tuple[tuple[float, float], ...]]
    T1: np.ndarray
    batch: np.ndarray
    iterations: np.ndarray
    seed: np.ndarray

    @classmethod
    def of(cls, t: pd.DataFrame) -> _Table:
        pilot = t["pilot"].fillna(False).astype(bool).to_numpy() if "pilot" in t else np.zeros(len(t), bool)
        number = functools.partial(pd.to_numeric, errors="coerce")
        return cls(
            t["_S"].to_numpy(float), pilot, list(t[PROFILE]), list(t[FOLDED]), number(t["T1"]).to_numpy(float),
            number(t["batch_size"]).to_numpy(float), number(t["iterations"]).to_numpy(float),
            number(t["seed"]).to_numpy(float),
        )  # fmt: skip


def _donors(t: _Table, k: int) -> tuple[np.ndarray, str]:
    """The positions of the runs whose noise predicts run k's iterations, never run k itself: the table's pilot
    runs where it has any (the probe `advise` planned the matrix from: the report then judges the prediction it
    printed); else its runs at other scales (the noise scale is the task's along τ, whatever S measured it);
    where there are none, the other seeds at run k's scale."""
    others = np.arange(len(t.S)) != k
    pilot = np.flatnonzero(others & t.pilot)
    if len(pilot):
        scales = ", ".join(f"{s:g}" for s in np.unique(t.S[pilot]))
        return pilot, f"pilot run{'s' if len(pilot) > 1 else ''} at S = {scales}"
    other = np.flatnonzero(t.S != t.S[k])
    if len(other):
        scales = ", ".join(f"{s:g}" for s in np.unique(t.S[other]))
        return other, f"S = {scales} ({len(other)} run{'s' if len(other) > 1 else ''})"
    same = np.flatnonzero(others)
    n = len(same)
    return same, (f"other seeds at S = {t.S[k]:g} ({n} run{'s' if n > 1 else ''})" if n else "")


def _prediction(t: _Table, k: int) -> dict[str, object]:
    """Run k's prediction from its donors: from advise's probes, the mean over their seeds (`_from_pilots`) and its
    range; else the median over every donor of `iterations_following` at run k's S and T1, and the range of the
    per-scale medians (per seed where the donors share one scale)."""
    donors, source = _donors(t, k)
    S, T1 = int(t.S[k]), float(t.T1[k])
    out: dict[str, object] = {PREDICTED: math.nan, PREDICTED_LO: math.nan, PREDICTED_HI: math.nan}
    out |= {PREDICTED_FROM: source, SMALL_BATCH: None}
    if not len(donors) or not (math.isfinite(T1) and T1 > 0):
        out[PREDICTED_FROM] = "no other run of the table measured the noise scale"
        return out
    pairs = _from_pilots(t, donors, S, T1) if t.pilot[donors].all() else None
    if pairs is not None:  # advise's probes: the mean over their seeds, as advice.csv printed it
        p = pairs[np.isfinite(pairs)]
        centre, groups = (float(np.mean(p)), p) if len(p) else (math.nan, p)
    else:  # other runs of the table: each donor's profile as it is
        p = np.array([_cached(t.folded[d], S, T1) for d in donors], dtype=float)
        finite = np.isfinite(p)
        p, scales = p[finite], t.S[donors][finite]
        groups = np.array([np.median(p[scales == s]) for s in np.unique(scales)]) if len(np.unique(scales)) > 1 else p
        centre = float(np.median(p)) if len(p) else math.nan
    if not len(p):
        return out
    b = float(t.batch[k])
    B = _profile_noise([t.profiles[d] for d in donors], b) if math.isfinite(b) and b > 0 else math.nan
    out.update(
        {
            PREDICTED: centre,
            PREDICTED_LO: float(groups.min()),
            PREDICTED_HI: float(groups.max()),
            PREDICTED_FROM: source,
            SMALL_BATCH: bool(S * b <= SMALL_BATCH_SHARE * B) if B == B else None,  # B = inf: True; NaN: unknown
        }
    )
    return out


def _from_pilots(t: _Table, donors: np.ndarray, S: int, T1: float) -> np.ndarray | None:
    """advise's prediction from its probes (pilot runs at two S or more): for each seed with a pilot at every S the
    pilots hold, its chain through bench.core.algo.transfer (its own slopes), their mean as advice.csv printed it
    (reports.advice.Probes) once averaged; where no seed has all, every chain of one pilot per S. None where the
    pilots share one S."""
    scales = np.unique(t.S[donors])[::-1]
    if len(scales) < 2:
        return None
    by_seed: dict[Any, dict[Any, int]] = {}
    for d in donors:
        by_seed.setdefault(t.seed[d], {})[t.S[d]] = int(d)
    chains = [[m[s] for s in scales] for m in by_seed.values() if len(m) == len(scales)]
    chains = chains or list(itertools.product(*(donors[t.S[donors] == s] for s in scales)))
    out = [
        transfer.Chain(
            tuple(transfer.Anchor(int(t.S[d]), t.folded[d], float(t.iterations[d])) for d in c), T1
        ).iterations(S)
        for c in chains
    ]
    return np.array(out, dtype=float)


def _profile_noise(profiles: list[tuple[tuple[float, float], ...]], batch_size: float) -> float:
    """The smallest over tenths of the donors' median noise scale b·σ²/μ² (inf where μ² ≤ 0)."""
    arr = np.asarray(profiles, float)  # donors × tenths × (σ², μ²)
    sigma2, mu2 = np.median(arr[:, :, 0], axis=0), np.median(arr[:, :, 1], axis=0)
    return float(np.min(b_simple_of(sigma2, mu2, batch_size)))


_PREDICTIONS: dict[tuple[tuple[tuple[float, float], ...], int, float], float] = {}


def _cached(p: tuple[tuple[float, float], ...], scale: int, T1: float) -> float:
    """iterations_following, memoised: every run of a table is predicted from the same donors' profiles."""
    key = (p, scale, T1)
    if key not in _PREDICTIONS:
        if len(_PREDICTIONS) > 100_000:
            _PREDICTIONS.clear()
        _PREDICTIONS[key] = iterations_following(p, scale, T1)
    return _PREDICTIONS[key]


def predict(runs: pd.DataFrame, workers: int = 1) -> pd.DataFrame:
    """PREDICTION_COLUMNS of every completed fixed-S AdaScale run (S ≥ 2) with a noise profile, from the other
    runs of its table (task, preset, variant) — never from its own statistics: finding (iii)'s prediction
    (docs/design.md §5), in `workers` processes where there are many."""
    fixed = runs["scale"].map(lambda s: scale_order(s)[0] == 0 and scale_order(s)[1] >= 2)
    ok = fixed & (runs["method"] == ADASCALE) & (runs["status"] == "completed") & runs[PROFILE].notna()
    ok &= runs[FOLDED].notna()
    kind = runs["experiment_kind"] if "experiment_kind" in runs else pd.Series(None, index=runs.index)
    ok &= kind.isna() | kind.isin(("table2",))
    if not ok.any():
        return runs
    keys = runs.loc[ok, ["task", "preset", "variant"]].fillna("").astype(str)
    pool = runs[ok].assign(
        _S=runs.loc[ok, "scale"].map(lambda s: float(scale_order(s)[1])),
        _key=["\x1f".join(k) for k in keys.itertuples(index=False)],
    )
    tables = [(t.index, _Table.of(t)) for _, t in pool.groupby("_key", sort=False)]
    needed = {
        (t.folded[d], int(t.S[k]), float(t.T1[k])) for _, t in tables for k in range(len(t.S)) for d in _donors(t, k)[0]
    }
    _precompute(needed, workers)
    for index, t in tables:
        for k, i in enumerate(index):
            for col, v in _prediction(t, k).items():
                runs.at[i, col] = v
    return runs


PARALLEL_FROM = 2_000  # predictions worth forking worker processes for (the paper matrix's: ~21 000)


def _precompute(keys: set[tuple[tuple[tuple[float, float], ...], int, float]], workers: int = 1) -> None:
    """Every prediction the tables need that is not memoised yet, one `iterations_following_each` per (S, T1):
    the donors of a run share its S and T1, so `_cached` then finds them all (the paper matrix: ~21 000
    predictions in ~350 passes, each profile stepped as it would be alone), in `workers` forked processes
    where there are many: numpy's arithmetic over ~7 000 iterations a prediction, the same numbers anywhere."""
    by_point: dict[tuple[int, float], list[tuple[tuple[float, float], ...]]] = {}
    for p, scale, T1 in sorted(k for k in keys if k not in _PREDICTIONS and math.isfinite(k[2])):
        by_point.setdefault((scale, T1), []).append(p)
    points = list(by_point.items())
    if workers > 1 and sum(len(profiles) for _, profiles in points) >= PARALLEL_FROM:
        from reports.rundata.workers import pool as worker_pool

        with worker_pool(workers) as ex:
            counts = list(ex.map(_each, points, chunksize=max(1, len(points) // (4 * workers))))
    else:
        counts = [_each(point) for point in points]
    if len(_PREDICTIONS) + len(keys) > 100_000:
        _PREDICTIONS.clear()
    for ((scale, T1), profiles), values in zip(points, counts, strict=True):
        for p, value in zip(profiles, values, strict=True):
            _PREDICTIONS[(p, scale, T1)] = float(value)


def _each(point: tuple[tuple[int, float], list[tuple[tuple[float, float], ...]]]) -> np.ndarray:
    (scale, T1), profiles = point
    return iterations_following_each(profiles, scale, T1)


def per_run(t: pd.DataFrame) -> pd.DataFrame:
    """The fixed-S AdaScale runs (S ≥ 2, completed) of one table with a noise scale in every window (after
    `fill`; inf counts: μ² not above its noise)."""
    if t.empty or any(c not in t for c in WINDOW_COLUMNS):
        return t.iloc[0:0]
    fixed = t["scale"].map(lambda s: scale_order(s)[0] == 0 and scale_order(s)[1] >= 2)
    g = t[fixed & (t["method"] == ADASCALE) & (t["status"] == "completed")]
    b = g[list(WINDOW_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    return g[b.notna().all(axis=1)]


@dataclass
class TaskNoise:
    """A table's noise scale: per window the median over its fixed-S AdaScale runs with S ≥ 2, and the range
    over every run and window."""

    medians: dict[str, float]  # WINDOW_COLUMNS -> median over runs
    lo: float
    hi: float
    runs: int
    scales: tuple[str, ...] = ()
    left_out: str = ""  # why a table shows none (an AdamW table: reports.verdicts.findings), said in its place

    @property
    def top(self) -> float:
        """The largest window median: S·b past it is past the noise scale throughout training."""
        return max(self.medians.values()) if self.runs else math.nan

    def text(self) -> str:
        """'B 205–∞ over 9 runs (S = 2–8); medians early 225, middle 2,814, late 5,048'."""
        if self.left_out:
            return self.left_out
        if not self.runs:
            return "B – (no AdaScale run with S ≥ 2 and statistics)"
        s = f"S = {self.scales[0]}" if len(self.scales) == 1 else f"S = {self.scales[0]}–{self.scales[-1]}"
        med = ", ".join(
            f"{name} {fmt(self.medians[col])}" for col, (name, _, _) in zip(WINDOW_COLUMNS, WINDOWS, strict=True)
        )
        return f"B {fmt(self.lo)}–{fmt(self.hi)} over {self.runs} run(s) ({s}); medians {med}"


def task_noise(t: pd.DataFrame) -> TaskNoise:
    """The noise scale of one table (after `fill`): what decides whether (ii) can be tested."""
    g = per_run(t)
    if g.empty:
        return TaskNoise(dict.fromkeys(WINDOW_COLUMNS, math.nan), math.nan, math.nan, 0)
    b = g[list(WINDOW_COLUMNS)].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    scales = tuple(sorted(g["scale"].unique(), key=scale_order))
    medians = {col: float(np.median(b[:, k])) for k, col in enumerate(WINDOW_COLUMNS)}
    return TaskNoise(medians, float(b.min()), float(b.max()), len(g), scales)


def task_value(t: pd.DataFrame) -> tuple[float, int]:
    """(the largest window median of the table's noise scale, how many runs): (NaN, 0) when none."""
    n = task_noise(t)
    return n.top, n.runs


def fmt(b: float) -> str:
    """B_simple as printed: a whole number of examples; ∞ when μ² was not above its noise."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "–"
    return "∞" if math.isinf(b) else f"{b:,.0f}"

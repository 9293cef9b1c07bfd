"""Finding (iv), the emergent warm-up, per run: over the first WARMUP_WINDOW of τ the normalised gain
u = (r − 1)/(r̂ − 1) starts at most WARMUP_START and rises by at least WARMUP_RISE, r̂ the steady gain of the run's
late noise scale; judged on the online gain where the window spans WARMUP_MEMORIES gain memories, else on the gain
measured afresh at kept checkpoints inside it (reports.verdicts.findings.check_iv turns the runs into a verdict)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core.algo.gain import steady_gain, theta
from bench.core.algo.rules import ADASCALE
from bench.core.files import OFFLINE_GAIN
from reports.rundata.collect import Results, scale_order
from reports.rundata.guards import float_columns
from reports.stats import lagmatch, noise
from reports.stats.noninferiority import fixed_scales

WARMUP_WINDOW = 0.10  # (iv): the first 10 % of τ
WARMUP_START = 0.5  # (iv): starts below half the range [1, r̂]
WARMUP_RISE = 0.2  # (iv): rises by a fifth of the range
WARMUP_MIN_RECORDS = 5
WARMUP_MEMORIES = 3  # (iv): the online gain is judged where the window spans this many gain memories
WARMUP_MIN_POINTS = 3  # (iv): kept checkpoints needed inside the window otherwise (a line and its scatter)
WARMUP_BOOT = 2000  # (iv): bootstrap draws of the fit over kept checkpoints
WARMUP_DECIDE = 0.95  # (iv): the share of draws on one side of the rule that decides (one-sided α = 0.05)
OFFLINE_Z = 1.959963984540054  # the offline gain's interval is a two-sided 95 % one (reports.stats.lagmatch)
INITIAL_PARTS = round(1 / WARMUP_WINDOW)  # the initial noise scale: B over the first tenth of τ, the window


# ------------------------------------------------------------------------------------------ (iv)


@dataclass
class Warmup:
    start: float  # normalised gain (r − 1)/(r̂ − 1) at the window's start
    end: float  # … at its end
    records: int  # records (online) or kept checkpoints (offline / exact) in the window
    holds: bool | None  # None: not judged (the reason in `why`)
    settles: float = math.nan  # r̂, the gain the run's late noise scale allows (S where unknown)
    source: str = "online"  # online | exact | offline
    why: str = ""
    memories: float = math.nan  # gain memories (1000/S iterations) the window spans
    undecided: bool = False  # judged, but the measurement's interval straddles the rule (inconclusive)
    predicted: str = ""  # whether the initial noise scale predicts a warm-up: yes | no | maybe | "" (unknown)
    gate: str = ""  # the words of that prediction (S·b against the initial noise scale)


def settled_gain(late_noise: float, batch: float, scale: float) -> float:
    """(iv)'s r̂: the steady gain of the run's late noise scale (≤ S; S where unknown)."""
    if not late_noise >= 0:
        return float(scale)
    return min(steady_gain(late_noise, batch, scale), float(scale))


def _judge(u_start: float, u_end: float) -> bool:
    return u_start <= WARMUP_START and u_end - u_start >= WARMUP_RISE


def warmup(train: pd.DataFrame, scale: float, T1: float, settles: float | None = None) -> Warmup:
    """(iv) on one run's online gain: the normalised gain over the first WARMUP_WINDOW of τ (means of its first
    and last fifth of records), against `settles` (r̂; S when None). Judged only where the window spans
    ≥ WARMUP_MEMORIES gain memories (1000/S iterations each)."""
    r_hat = float(scale) if settles is None or not math.isfinite(settles) else min(float(settles), float(scale))
    columns = float_columns(train)  # a name the frame holds twice is none of them
    if train.empty or not {"tau", "gain"} <= columns.keys() or not (r_hat > 1 and math.isfinite(T1)):
        return Warmup(math.nan, math.nan, 0, None, r_hat, why="no gain records")
    tau, gain = columns["tau"], columns["gain"]
    window = ~(np.isnan(tau) | np.isnan(gain)) & (tau <= WARMUP_WINDOW * T1)  # dropna, then the window
    n = int(window.sum())
    it = columns["iteration"][window] if "iteration" in columns else np.zeros(0)
    it = it[~np.isnan(it)]  # Series.max skips NaN; NaN where none is left
    iterations = (float(it.max() + 1) if len(it) else math.nan) if "iteration" in train and n else float(n)
    memories = iterations / (1.0 / (1.0 - theta(int(scale)))) if theta(int(scale)) < 1 else math.inf
    if n < WARMUP_MIN_RECORDS:
        return Warmup(math.nan, math.nan, n, None, r_hat, why=f"{n} record(s) in the first 10 % of τ")
    if memories < WARMUP_MEMORIES:
        why = f"the window spans {memories:.2g} gain memories (< {WARMUP_MEMORIES}: the online gain lags)"
        return Warmup(math.nan, math.nan, n, None, r_hat, why=why, memories=memories)
    u = (gain[window] - 1) / (r_hat - 1)
    k = max(1, math.ceil(n / 5))
    start, end = float(u[:k].mean()), float(u[-k:].mean())
    return Warmup(start, end, n, _judge(start, end), r_hat)


def offline_points(res: Results, run_dir: str) -> pd.DataFrame | None:
    """(tau, gain, lo, hi, source) of a run's offline_gain.csv, read once by reports.stats.lagmatch (through
    bench.core.safefs: no link, no FIFO, bounded; every value in range): the exact gain where the file has it
    (lo = hi: no interval), else the offline estimate with its jackknife interval; None where there is no
    file (silently) or no usable one (with lagmatch's warning naming it)."""
    if not os.path.lexists(Path(run_dir) / OFFLINE_GAIN):
        return None
    df = lagmatch.offline_points(res, run_dir)
    if df is None:
        return None
    exact = "exact_gain" in df and bool(np.isfinite(df["exact_gain"]).all())
    gain = df["exact_gain"] if exact else df["offline_gain"]
    lo = gain if exact or "gain_lo" not in df else df["gain_lo"].fillna(gain)
    hi = gain if exact or "gain_hi" not in df else df["gain_hi"].fillna(gain)
    out = pd.DataFrame({"tau": df["tau"], "gain": gain, "lo": lo, "hi": hi}).dropna()
    return out.assign(source="exact" if exact else "offline").sort_values("tau") if len(out) else None


def _fit_ends(tau: np.ndarray, u: np.ndarray, at: tuple[float, float]) -> tuple[float, float]:
    """The least-squares line of u on τ at the window's first and last checkpoint; NaN with < 2 distinct τ."""
    if np.ptp(tau) == 0:
        return math.nan, math.nan
    slope, icept = np.polyfit(tau, u, 1)
    return float(icept + slope * at[0]), float(icept + slope * at[1])


def offline_warmup(points: pd.DataFrame, scale: float, T1: float, settles: float) -> Warmup:
    """(iv) on the gain measured afresh at kept checkpoints: a line fitted to the normalised gain over every
    checkpoint in the window, its start and end at the first and last of them — not the first point against the
    last, which decides by chance where the offline gain swings between neighbouring checkpoints (issue 53: 3.5 →
    21 two iterations apart). Decided on WARMUP_BOOT draws that resample the checkpoints with replacement and move
    each drawn point within its measurement's interval (the offline gain's 95 % jackknife interval; the exact
    gain has none): holds where ≥ WARMUP_DECIDE of the draws' fits hold, fails where ≤ 1 − WARMUP_DECIDE do,
    else undecided. Fixed seed: the same report twice says the same."""
    r_hat = float(scale) if not math.isfinite(settles) else min(float(settles), float(scale))
    p = points[points["tau"] <= WARMUP_WINDOW * T1]
    source = str(points["source"].iloc[0]) if len(points) else "offline"
    if len(p) < WARMUP_MIN_POINTS or not r_hat > 1 or p["tau"].nunique() < 2:
        why = f"{len(p)} kept checkpoint(s) in the first 10 % of τ (< {WARMUP_MIN_POINTS} for a fit)"
        return Warmup(math.nan, math.nan, len(p), None, r_hat, source, why)
    tau = p["tau"].to_numpy(float)
    u = (p["gain"].to_numpy(float) - 1) / (r_hat - 1)
    sd = (p["hi"].to_numpy(float) - p["lo"].to_numpy(float)) / (2 * OFFLINE_Z * (r_hat - 1))
    ends = (float(tau.min()), float(tau.max()))
    start, end = _fit_ends(tau, u, ends)
    rng = np.random.default_rng(0)
    held = drawn = 0
    for _ in range(WARMUP_BOOT):
        k = rng.integers(0, len(p), len(p))
        s, e = _fit_ends(tau[k], u[k] + rng.normal(0.0, 1.0, len(k)) * sd[k], ends)
        if math.isfinite(s):
            drawn += 1
            held += _judge(s, e)
    share = held / drawn if drawn else math.nan
    fit = f"a line over {len(p)} checkpoints, its rule held in {share:.0%} of {drawn} bootstrap draws"
    if share >= WARMUP_DECIDE:
        return Warmup(start, end, len(p), True, r_hat, source, fit)
    if share <= 1 - WARMUP_DECIDE:
        return Warmup(start, end, len(p), False, r_hat, source, fit)
    return Warmup(start, end, len(p), None, r_hat, source, fit, undecided=True)


def _base_variant(variant: str) -> str:
    """A run's variant without the keys that only keep weights (a `gain` run is its Table 2 twin otherwise)."""
    parts = [p for p in str(variant or "").split(",") if p and not p.startswith("keep_checkpoints")]
    return ",".join(parts)


def gain_twins(res: Results, t: pd.DataFrame) -> pd.DataFrame:
    """The `gain` experiment runs of a table's configuration: AdaScale runs with kept weights, same task,
    preset and variant once the keep-checkpoint keys are left out."""
    r = res.runs
    if r.empty or t.empty:
        return r.iloc[0:0]
    first = t.iloc[0]
    same = (r["task"] == first["task"]) & (r["preset"].fillna("") == (first["preset"] or ""))
    same &= r["experiment_kind"] == "gain"
    variant = str(first["variant"] or "")
    g = r[same & (r["method"] == ADASCALE) & (r["status"] == "completed")]
    return g[g["variant"].map(_base_variant) == variant]


def in_place(runs: pd.DataFrame, twins: pd.DataFrame) -> pd.DataFrame:
    """A table's `runs` with its `gain` twins (`gain_twins`, filtered as the caller filters its runs), each twin in
    place of the table's run of its S and seed: the same training judged once, on the run that kept its weights
    (findings (iii) and (iv) both read it)."""
    if twins.empty:
        return runs
    twin = set(zip(twins["scale"].astype(str), twins["seed"].astype(str), strict=True))
    mine = np.array([(str(s), str(e)) not in twin for s, e in zip(runs["scale"], runs["seed"], strict=True)], bool)
    return pd.concat([runs[mine], twins]).drop_duplicates("run_dir")


def initial_noise(res: Results, r: pd.Series, per_epoch: float) -> float:
    """A run's initial noise scale: B = b·σ²/μ² over the first tenth of τ, the warm-up window (reports.stats.noise's
    definition: τ-weighted, corrected for drawing without replacement); NaN where it has no statistics there."""
    T1, b = float(r["T1"]), float(r["batch_size"])
    if not (math.isfinite(T1) and T1 > 0):
        return math.nan
    var, sqr = noise.window_moments(res.metrics(r["run_dir"])[0], T1, per_epoch, INITIAL_PARTS)[0]
    return b * var / sqr if sqr > 0 and var >= 0 else math.nan


def predicted_start(initial: float, batch: float, scale: float, r_hat: float) -> float:
    """Where the noise puts the normalised gain at the window's start: (r(B₀) − 1)/(r̂ − 1), r(B₀) the steady gain
    of the initial noise scale B₀. S·b ≪ B₀ puts it near 1 (the gain starts where it settles: no warm-up)."""
    return (settled_gain(initial, batch, scale) - 1) / (r_hat - 1) if r_hat > 1 else math.nan


def gated(w: Warmup, r: pd.Series, initial: tuple[float, float, int]) -> Warmup:
    """(iv) only where a warm-up is predicted: the start the table's initial noise scale (its range over the
    table's runs, `initial` = (lo, hi, runs)) predicts, against WARMUP_START. Predicted over the whole range: judged;
    over none of it: not judged, saying why and what the run showed (nothing hidden: the table's verdict comes
    from the runs where a warm-up is predicted); over part of it: judged, but a run that fails is undecided (the
    noise allows no warm-up there). Unknown (no statistics): judged, saying so."""
    lo, hi, n = initial
    S, b = float(r["scale"]), float(r["batch_size"])
    if not (math.isfinite(lo) and math.isfinite(hi) and w.settles > 1):
        return dataclasses.replace(w, gate="no initial noise scale measured: judged without the gate")
    u_lo, u_hi = (predicted_start(B, b, S, w.settles) for B in (lo, hi))
    span = f"{lo:.3g}" if lo == hi else f"{lo:.3g}–{hi:.3g}"
    at = f"{u_lo:.2f}" if lo == hi else f"{u_lo:.2f}–{u_hi:.2f}"
    text = f"S·b = {S * b:g} against the initial noise scale {span} (first 10 % of τ, {n} run(s)): predicted start {at}"
    if u_lo > WARMUP_START:
        shown = f"; the run: {w.start:.2f} → {w.end:.2f} ({w.source})" if math.isfinite(w.start) else ""
        why = f"no warm-up predicted ({text} > {WARMUP_START:g}){shown}"
        return dataclasses.replace(w, holds=None, undecided=False, predicted="no", gate=text, why=why)
    if u_hi <= WARMUP_START:
        return dataclasses.replace(w, predicted="yes", gate=text)
    if w.holds is False:
        why = f"does not rise, but the noise allows no warm-up over part of its interval ({text})"
        return dataclasses.replace(w, holds=None, undecided=True, predicted="maybe", gate=text, why=why)
    return dataclasses.replace(w, predicted="maybe", gate=text)


def run_warmups(res: Results, t: pd.DataFrame) -> list[tuple[pd.Series, Warmup]]:
    """(run, Warmup) of every completed fixed-S AdaScale run with S ≥ 2 of a table, its `gain` runs in place of
    their twins (`in_place`: a seed judged once): online where the window is long enough, else at kept
    checkpoints, else not judged; each `gated` on the table's initial noise scale (judged only where a warm-up is
    predicted)."""
    out: list[tuple[pd.Series, Warmup]] = []
    table = [g for s, g in fixed_scales(t, ADASCALE).items() if float(s) >= 2]
    if not table and gain_twins(res, t).empty:
        return out

    def usable(g: pd.DataFrame) -> pd.DataFrame:
        return g[(g["status"] == "completed") & g["has_metrics"].astype(bool)]

    runs = in_place(usable(pd.concat(table)) if table else t.iloc[0:0], usable(gain_twins(res, t)))
    if runs.empty:
        return out
    filled = noise.fill(res)  # each run's late noise scale (idempotent; a caller may hold rows from before)
    late = dict(zip(filled["run_dir"], pd.to_numeric(filled[noise.WINDOW_COLUMNS[-1]], errors="coerce"), strict=True))
    m = dict(zip(filled["run_dir"], pd.to_numeric(filled[noise.PER_EPOCH], errors="coerce"), strict=True))
    runs = runs.assign(_s=runs["scale"].map(lambda s: scale_order(s)[1])).sort_values(["_s", "seed", "run_dir"])
    memo = res.memo.setdefault("warmups", {})  # (iv) and the curves' caption judge the same runs: once
    b0 = res.memo.setdefault("initial_noise", {})
    for d in runs["run_dir"]:
        if d not in b0:
            per_epoch = m.get(d, math.inf)
            b0[d] = initial_noise(res, runs[runs["run_dir"] == d].iloc[0], per_epoch if per_epoch > 0 else math.inf)
    seen = np.array([b0[d] for d in runs["run_dir"] if math.isfinite(b0[d])])
    initial = (float(seen.min()), float(seen.max()), len(seen)) if len(seen) else (math.nan, math.nan, 0)
    for _, r in runs.iterrows():
        key = (r["run_dir"], late.get(r["run_dir"], math.nan))
        if key not in memo:
            memo[key] = _run_warmup(res, r, key[1])
        out.append((r, gated(memo[key], r, initial)))
    return out


def _run_warmup(res: Results, r: pd.Series, late_noise: float) -> Warmup:
    """One run's Warmup: online where its window is long enough, else at its kept checkpoints."""
    S, b, T1 = float(r["scale"]), float(r["batch_size"]), float(r["T1"])
    r_hat = settled_gain(late_noise, b, S)
    w = warmup(res.metrics(r["run_dir"])[0], S, T1, r_hat)
    if w.holds is None:
        points = offline_points(res, r["run_dir"])
        if points is not None:
            off = offline_warmup(points, S, T1, r_hat)
            w = (
                off
                if off.holds is not None or off.undecided
                else Warmup(**{**w.__dict__, "why": f"{w.why}; {off.why}", "source": "few"})
            )
    return w

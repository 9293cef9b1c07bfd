"""Finding (iv), the emergent warm-up, per run: over the first WARMUP_WINDOW of τ the normalised gain
u = (r − 1)/(r̂ − 1) starts at most WARMUP_START and rises by at least WARMUP_RISE, r̂ the steady gain of the run's
late noise scale; judged on the online gain where the window spans WARMUP_MEMORIES gain memories, else on the gain
measured afresh at kept checkpoints inside it (reports.findings.check_iv turns the runs into a verdict)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.algo.gain import steady_gain, theta
from bench.algo.rules import ADASCALE
from bench.files import OFFLINE_GAIN

from . import lagmatch, noise
from .collect import Results, scale_order
from .guards import float_columns
from .noninferiority import fixed_scales

WARMUP_WINDOW = 0.10  # (iv): the first 10 % of τ
WARMUP_START = 0.5  # (iv): starts below half the range [1, r̂]
WARMUP_RISE = 0.2  # (iv): rises by a fifth of the range
WARMUP_MIN_RECORDS = 5
WARMUP_MEMORIES = 3  # (iv): the online gain is judged where the window spans this many gain memories
WARMUP_MIN_POINTS = 2  # (iv): kept checkpoints needed inside the window otherwise


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
    """(tau, gain, lo, hi, source) of a run's offline_gain.csv, read once by reports.lagmatch (through
    bench.safefs: no link, no FIFO, bounded; every value in range): the exact gain where the file has it
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


def offline_warmup(points: pd.DataFrame, scale: float, T1: float, settles: float) -> Warmup:
    """(iv) on the gain measured afresh at kept checkpoints: the first and the last point in the window, decided
    on the measurement's interval (the offline gain's jackknife interval; the exact gain has none): holds
    where it holds at the interval's least favourable ends (start's upper, end's lower), fails where it fails
    at the most favourable ones, else undecided."""
    r_hat = float(scale) if not math.isfinite(settles) else min(float(settles), float(scale))
    p = points[points["tau"] <= WARMUP_WINDOW * T1]
    source = str(points["source"].iloc[0]) if len(points) else "offline"
    if len(p) < WARMUP_MIN_POINTS or not r_hat > 1:
        why = f"{len(p)} kept checkpoint(s) in the first 10 % of τ (< {WARMUP_MIN_POINTS})"
        return Warmup(math.nan, math.nan, len(p), None, r_hat, source, why)

    def u(col: str, k: int) -> float:
        return (float(p[col].iloc[k]) - 1) / (r_hat - 1)

    start, end = u("gain", 0), u("gain", -1)
    if _judge(u("hi", 0), u("lo", -1)):
        return Warmup(start, end, len(p), True, r_hat, source)
    if not _judge(u("lo", 0), u("hi", -1)):
        return Warmup(start, end, len(p), False, r_hat, source)
    why = (
        f"the offline interval straddles the rule (start {u('lo', 0):.2f}–{u('hi', 0):.2f}, "
        f"end {u('lo', -1):.2f}–{u('hi', -1):.2f})"
    )
    return Warmup(start, end, len(p), None, r_hat, source, why, undecided=True)


def _base_variant(variant: str) -> str:
    """A run's variant without the keys that only keep weights (a `gain` run is its Table 2 twin otherwise)."""
    parts = [p for p in str(variant or "").split(",") if p and not p.startswith("keep_checkpoints")]
    return ",".join(parts)


def _gain_twins(res: Results, t: pd.DataFrame) -> pd.DataFrame:
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


def run_warmups(res: Results, t: pd.DataFrame) -> list[tuple[pd.Series, Warmup]]:
    """(run, Warmup) of every completed fixed-S AdaScale run with S ≥ 2 of a table, and of the `gain` runs of
    its configuration: online where the window is long enough, else at kept checkpoints, else not judged."""
    runs = pd.concat([g for s, g in fixed_scales(t, ADASCALE).items() if float(s) >= 2] + [_gain_twins(res, t)])
    out = []
    if runs.empty:
        return out
    runs = runs[runs["status"] == "completed"]
    filled = noise.fill(res)  # each run's late noise scale (idempotent; a caller may hold rows from before)
    late = dict(zip(filled["run_dir"], pd.to_numeric(filled[noise.WINDOW_COLUMNS[-1]], errors="coerce"), strict=True))
    runs = runs.assign(_s=runs["scale"].map(lambda s: scale_order(s)[1])).sort_values(["_s", "seed", "run_dir"])
    memo = res.memo.setdefault("warmups", {})  # (iv) and the curves' caption judge the same runs: once
    for _, r in runs.iterrows():
        if not bool(r["has_metrics"]):
            continue
        key = (r["run_dir"], late.get(r["run_dir"], math.nan))
        if key not in memo:
            memo[key] = _run_warmup(res, r, key[1])
        out.append((r, memo[key]))
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

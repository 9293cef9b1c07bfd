"""The paper's Figure 2, measured: the online gain beside the offline one at kept checkpoints, and the
offline (and, where the task has an oracle, the exact) moments passed through the engine's own moving
averages — the lag-matched gain — so that the report says how much of the online − offline gap is the
averages' lag. The figure (reports.figures.gain) and `report/figure2.csv` both read `points`.

Lag-matched gain at iteration t: `UnbiasedGain().fold(σ²_k, μ²_k, S_k)` for k = 0 … t (the engine's
clamp, θ(S_k) = max(1 − S_k/1000, 0) and bias correction, updated once per iteration), with S_k the run's
scale at iteration k (from its training records) and σ²_k, μ²_k the measured moments (offline_gain.csv's
`var`, `sqr`, or `exact_var`, `exact_sqr`) interpolated between the measured iterations: log-linearly in
the iteration where both ends are positive (μ² falls by orders of magnitude over a run, about
exponentially), linearly where one is not (a noisy μ² estimate can be ≤ 0); held at the first measurement
before it (none to hold when `gain` measured the initial weights, iteration 0, as it does since #30).
On the smoke's logreg S = 8 run, against the same averages replayed on the exact moments of every one of
its 423 iterations, log-linear interpolation of the exact moments at iterations 0, 50, …, 400 is off by at
most 0.11 at the checkpoints; linear by 0.53; holding the iteration-50 moments back to 0 by 1.27.

The gap at the kept checkpoints (iteration > 0; means over them) splits as

    online − offline = (lag-matched − offline)       lag: the averaging of the measured moments
                     + (replay − lag-matched)        noise: per-iteration moments against the measured ones
                     + (online − replay)             clamp: μ²_t ≥ 0 per iteration before averaging

with `replay` the engine's averages replayed unclamped on the run's own per-iteration moments
(metrics.jsonl sum_sq, mean_sq, scale; only where the training records are complete, else the last two
terms stay together). `lag_share` = lag / gap.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from bench.core import safefs
from bench.core.algo.gain import UnbiasedGain, moments
from bench.core.files import OFFLINE_GAIN
from reports.rundata import guards
from reports.rundata.collect import Results

COLUMNS = [
    "run",
    "task",
    "method",
    "scale",
    "seed",
    "iteration",
    "tau",
    "S",
    "online",
    "offline",
    "lo",
    "hi",
    "lag_matched",
    "replay_unclamped",
    "exact",
    "exact_lag_matched",
    "offline_B",
    "B_lo",
    "B_hi",
    "exact_B",
]


MAX_OFFLINE_BYTES = 64 << 20
MAX_OFFLINE_ROWS = 100_000  # kept checkpoints of one run (the paper's: under 100)


def offline_points(res: Results, run_dir: str) -> pd.DataFrame | None:
    """A run's offline_gain.csv with every column numeric, sorted by iteration (the interval and exact
    columns only where written); None (with a warning) when unusable."""
    path = Path(run_dir) / OFFLINE_GAIN
    try:  # no link, no FIFO, bounded (bench.core.safefs); rows bounded too (a kept checkpoint per row)
        df = pd.read_csv(io.BytesIO(safefs.read_bytes(path, MAX_OFFLINE_BYTES)), nrows=MAX_OFFLINE_ROWS)
    except (OSError, ValueError) as e:
        res.warn(f"skipped {path}: {type(e).__name__}: {e}")
        return None
    if not {"tau", "offline_gain"} <= set(df.columns):
        res.warn(f"skipped {path}: no tau and offline_gain columns")
        return None
    df = df.apply(guards.numeric)
    df = guards.frame(df, path, res.warn, guards.OFFLINE_RANGES).dropna(subset=["tau", "offline_gain"])
    if "iteration" in df:
        df = df.sort_values("iteration", kind="stable")
    return df if not df.empty else None


def scales_by_iteration(train: pd.DataFrame, last: int) -> np.ndarray:
    """S_k for k = 0 … last from the training records (the latest record at or before k: exact where the
    records are complete, to within the sampling step where runcache sampled them); empty without them."""
    if train.empty or not {"iteration", "scale"} <= set(train.columns):
        return np.array([], dtype=int)
    d = train[["iteration", "scale"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    its, s = d["iteration"].to_numpy(float), d["scale"].to_numpy(float)
    if not len(its):
        return np.array([], dtype=int)
    idx = np.clip(np.searchsorted(its, np.arange(last + 1), side="right") - 1, 0, None)
    return s[idx].astype(int)


def interpolate(iterations: np.ndarray, values: np.ndarray, last: int) -> np.ndarray:
    """values (at increasing `iterations`) at every iteration 0 … last: log-linear between two positive
    neighbours, linear otherwise, the first value held before the first iteration, the last after."""
    out = np.empty(last + 1)
    k = np.arange(last + 1)
    out[:] = np.interp(k, iterations, values)
    for a, b, va, vb in zip(iterations[:-1], iterations[1:], values[:-1], values[1:], strict=True):
        if va > 0 and vb > 0:
            seg = (k >= a) & (k <= b)
            out[seg] = np.exp(np.interp(k[seg], [a, b], [math.log(va), math.log(vb)]))
    return out


def lag_matched(iterations: np.ndarray, var: np.ndarray, sqr: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The gain the engine's averages give at every iteration 0 … len(scales) − 1 when fed the moments
    measured at `iterations` (interpolated, see the module docstring) instead of each iteration's own."""
    ok = np.isfinite(iterations) & np.isfinite(var) & np.isfinite(sqr)
    if not ok.any() or not len(scales):
        return np.full(len(scales), np.nan)
    its, last = iterations[ok], len(scales) - 1
    v, s = interpolate(its, var[ok], last), interpolate(its, sqr[ok], last)
    est = UnbiasedGain()
    return np.array([est.fold(v[k], s[k], int(scales[k])) for k in range(last + 1)])


def replay_unclamped(train: pd.DataFrame) -> pd.Series:
    """The engine's averages replayed on the run's own per-iteration moments, unclamped: iteration → gain;
    empty unless every training record is there with sum_sq, mean_sq and scale."""
    need = {"iteration", "scale", "sum_sq", "mean_sq"}
    if train.empty or not need <= set(train.columns) or train.attrs.get("sampled"):
        return pd.Series(dtype=float)
    d = train[sorted(need)].apply(pd.to_numeric, errors="coerce").sort_values("iteration")
    if d.isna().any().any() or not np.array_equal(d["iteration"].to_numpy(), np.arange(len(d))):
        return pd.Series(dtype=float)
    est = UnbiasedGain()
    gains = [
        est.fold(*moments(q, m, int(s)), int(s), clamped=False) if s > 1 else 1.0
        for q, m, s in zip(d["sum_sq"], d["mean_sq"], d["scale"], strict=True)
    ]
    return pd.Series(gains, index=d["iteration"].astype(int).to_numpy())


def online_at(train: pd.DataFrame, iterations: np.ndarray) -> np.ndarray:
    """The online gain at each iteration: the record of that iteration (or the last before it)."""
    if train.empty or not {"iteration", "gain"} <= set(train.columns):
        return np.full(len(iterations), np.nan)
    d = train[["iteration", "gain"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("iteration")
    its, gains = d["iteration"].to_numpy(float), d["gain"].to_numpy(float)
    if not len(its):
        return np.full(len(iterations), np.nan)
    idx = np.searchsorted(its, iterations, side="right") - 1
    return np.where(idx >= 0, gains[np.clip(idx, 0, None)], np.nan)


def _col(points: pd.DataFrame, name: str) -> np.ndarray:
    return points[name].to_numpy(float) if name in points else np.full(len(points), np.nan)


def points(train: pd.DataFrame, offline: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """(one row per measured iteration with COLUMNS' measurements, the lag-matched curves per iteration
    0 … the last measured one: `iteration`, `lag_matched`, `exact_lag_matched`) of one run."""
    its = _col(offline, "iteration")
    trained = pd.to_numeric(train["iteration"], errors="coerce").max() if "iteration" in train else np.nan
    its = np.where(its <= (trained + 1 if np.isfinite(trained) else 0), its, np.nan)  # only iterations run
    last = int(np.nanmax(its)) if np.isfinite(its).any() else -1
    scales = scales_by_iteration(train, last) if last >= 0 else np.array([], dtype=int)
    curve = {"iteration": np.arange(len(scales))}
    curve["lag_matched"] = lag_matched(its, _col(offline, "var"), _col(offline, "sqr"), scales)
    curve["exact_lag_matched"] = lag_matched(its, _col(offline, "exact_var"), _col(offline, "exact_sqr"), scales)
    at = np.clip(np.nan_to_num(its, nan=0).astype(int), 0, max(len(scales) - 1, 0))
    have = len(scales) > 0
    replay = replay_unclamped(train)
    out = pd.DataFrame(
        {
            "iteration": its,
            "tau": _col(offline, "tau"),
            "S": _col(offline, "scale"),
            "online": online_at(train, its),
            "offline": _col(offline, "offline_gain"),
            "lo": _col(offline, "gain_lo"),
            "hi": _col(offline, "gain_hi"),
            "lag_matched": curve["lag_matched"][at] if have else np.nan,
            "replay_unclamped": replay.reindex(at).to_numpy(float) if len(replay) else np.nan,
            "exact": _col(offline, "exact_gain"),
            "exact_lag_matched": curve["exact_lag_matched"][at] if have else np.nan,
            "offline_B": _col(offline, "offline_B"),
            "B_lo": _col(offline, "B_lo"),
            "B_hi": _col(offline, "B_hi"),
            "exact_B": _col(offline, "exact_B"),
        }
    )
    return out, curve


def decomposition(p: pd.DataFrame, reference: str = "offline", lagged: str = "lag_matched") -> dict[str, float]:
    """Means over the kept checkpoints (iteration > 0) of gap = online − reference, lag = lagged − reference,
    noise = replay − lagged, clamp = online − replay (NaN without a complete replay; then rest = online −
    lagged), lag_share = lag / gap, and n (how many checkpoints)."""
    k = p[(p["iteration"] > 0) & np.isfinite(p["online"]) & np.isfinite(p[reference]) & np.isfinite(p[lagged])]
    if k.empty:
        return {"n": 0, "gap": math.nan, "lag": math.nan, "rest": math.nan, "clamp": math.nan, "noise": math.nan,
                "lag_share": math.nan}  # fmt: skip
    gap = float((k["online"] - k[reference]).mean())
    lag = float((k[lagged] - k[reference]).mean())
    rep = k["replay_unclamped"]
    full = bool(np.isfinite(rep).all())
    return {
        "n": len(k),
        "gap": gap,
        "lag": lag,
        "rest": float((k["online"] - k[lagged]).mean()),
        "clamp": float((k["online"] - rep).mean()) if full else math.nan,
        "noise": float((rep - k[lagged]).mean()) if full else math.nan,
        "lag_share": lag / gap if gap != 0 else math.nan,
    }


def decomposition_text(p: pd.DataFrame) -> str:
    """'online − offline −1.98 at 8 checkpoints: lag −1.85 (93 %), clamp −0.12, noise −0.01' (and the
    same against the exact gain where there is one)."""
    parts = []
    for ref, lagged, name in (("offline", "lag_matched", "offline"), ("exact", "exact_lag_matched", "exact")):
        d = decomposition(p, ref, lagged)
        if not d["n"]:
            continue
        text = f"online − {name} {d['gap']:+.2f} at {d['n']} checkpoints: lag {d['lag']:+.2f}"
        text += f" ({d['lag_share']:.0%})" if math.isfinite(d["lag_share"]) else ""
        if math.isfinite(d["clamp"]):
            text += f", clamp {d['clamp']:+.2f}, noise {d['noise']:+.2f}"
        else:
            text += f", clamp and noise {d['rest']:+.2f}"
        parts.append(text)
    return "; ".join(parts) if parts else "no lag-matched gain (no training records)"


def table(res: Results) -> pd.DataFrame:
    """COLUMNS for every run with an offline_gain.csv (the figure's panels, in its order)."""
    frames = []
    for r, pts, _ in panels(res):
        name = Path(r["run_dir"])
        name = name.relative_to(res.root) if name.is_relative_to(res.root) else name
        meta = {"run": str(name), "task": r["task"], "method": r["method"], "scale": r["scale"], "seed": r["seed"]}
        frames.append(pts.assign(**meta))
    return pd.concat(frames, ignore_index=True)[COLUMNS] if frames else pd.DataFrame(columns=COLUMNS)


def panels(res: Results) -> list[tuple[pd.Series, pd.DataFrame, dict[str, np.ndarray]]]:
    """(run row, points, curve) per run folder with a usable offline_gain.csv, sorted by task, method, seed."""
    df = res.runs
    if df.empty:
        return []
    df = df[[(Path(d) / OFFLINE_GAIN).exists() for d in df["run_dir"]]]
    out = []
    for _, r in df.sort_values(["task", "method", "seed", "run_dir"]).iterrows():
        offline = offline_points(res, r["run_dir"])
        if offline is not None:
            train, _ = res.metrics(r["run_dir"])
            pts, curve = points(train, offline)
            out.append((r, pts, curve))
    return out


def write_csv(res: Results, path: Path) -> None:
    """report/figure2.csv: COLUMNS, one row per run and measured iteration (nothing without such runs)."""
    from bench.core.files import atomic_write_bytes

    t = table(res)
    if not t.empty:
        text = guards.csv_safe(t).to_csv(index=False, float_format="%.6g")  # no cell a formula
        atomic_write_bytes(path, text.encode(errors="backslashreplace"))


AGREE_SHARE = 0.5  # the paper's "align closely": at most half of the kept checkpoints outside the offline interval
LAG_EXPLAINS = 0.8  # a gap the averages' lag accounts for at least this share of is the lag's


def verdict(p: pd.DataFrame) -> tuple[str, str]:
    """(word, line) of one Figure 2 panel, as a finding reads: does the online gain align with the offline one
    at the kept checkpoints (the paper: closely), and where it does not, does the averages' lag explain it."""
    k = p[(p["iteration"] > 0) & np.isfinite(p["online"]) & np.isfinite(p["lo"]) & np.isfinite(p["hi"])]
    d = decomposition(p)
    if k.empty or not d["n"]:
        return "not testable", "no kept checkpoint with an offline interval"
    outside = int(((k["online"] < k["lo"]) | (k["online"] > k["hi"])).sum())
    line = f"online − offline {d['gap']:+.2f}, {outside} of {len(k)} checkpoints outside the offline 95 % interval"
    share = d["lag_share"]
    line += f"; the averages' lag explains {share:.0%}" if math.isfinite(share) else ""
    if outside <= AGREE_SHARE * len(k):
        return "aligns", line
    if math.isfinite(share) and share >= LAG_EXPLAINS:
        return "lags", line + " (a lag the paper's Figure 2 does not show)"
    return "differs", line + " (not the lag alone)"


def summary_lines(res: Results) -> list[str]:
    """One line per Figure 2 panel: 'logreg AdaScale S = 8 seed 0: lags — online − offline −1.97, …'."""
    from bench.core.methods import title

    lines = []
    for r, pts, _ in panels(res):
        word, line = verdict(pts)
        lines.append(f"{r['task']} {title(r['method'])} S = {r['scale']} seed {r['seed']}: {word} — {line}")
    return lines

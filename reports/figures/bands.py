"""Many seeds as one line: the mean over seeds with a min–max band, on the τ every seed reached."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reports.rundata.guards import floats

Curve = tuple[np.ndarray, np.ndarray]  # one seed's (τ, y)


def _curve(df: pd.DataFrame, y: str) -> Curve | None:
    """One seed's (τ, y) of a frame: `curve_of` its two columns; None where the frame lacks either."""
    if df.empty or "tau" not in df or y not in df:
        return None
    return curve_of(floats(df["tau"]), floats(df[y]))


def curve_of(tau: np.ndarray, v: np.ndarray) -> Curve | None:
    """One seed's (τ, y) as arrays: rows where both are numbers, sorted by τ (a frame in order already, as a
    run's records are, kept as it is), the last row of each τ kept; None where nothing is left. Arrays, not
    frames: the report draws hundreds of these, and pandas' per-call overhead was most of their cost."""
    keep = ~(np.isnan(tau) | np.isnan(v))  # dropna: ±inf stay, as pandas keeps them
    tau, v = tau[keep], v[keep]
    if not len(tau):  # no row with both numbers (a seed whose quantity holds none): no curve, not an IndexError
        return None
    if len(tau) > 1 and (np.diff(tau) < 0).any():
        order = np.argsort(tau, kind="quicksort")  # what sort_values does
        tau, v = tau[order], v[order]
    last = np.append(tau[1:] != tau[:-1], True)  # drop_duplicates(keep="last") of sorted τ
    tau, v = tau[last], v[last]
    return (tau, v) if len(tau) else None


def band(series: list[pd.DataFrame], y: str, n: int = 200) -> pd.DataFrame:
    """Mean, min and max over seeds of one quantity against τ (`band_of` each frame's `_curve`)."""
    arrays = band_of([_curve(df, y) for df in series], n)
    return pd.DataFrame(arrays) if arrays is not None else pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])


def band_of(curves: list[Curve | None], n: int = 200) -> dict[str, np.ndarray | int] | None:
    """Mean, min and max over seeds against τ (tau, mean, lo, hi, n: the seeds): each seed interpolated onto a
    common τ grid that spans only the range every seed covers — a mean is never one seed's value where the
    others have stopped (or not started); None without a curve or a stretch of τ they share."""
    parts = [p for p in curves if p is not None]
    if not parts:
        return None
    lo, hi = max(t[0] for t, _ in parts), min(t[-1] for t, _ in parts)
    if lo > hi:  # the seeds share no stretch of τ
        return None
    if n <= 0:
        grid = np.unique(np.concatenate([t for t, _ in parts]))
        grid = grid[(grid >= lo) & (grid <= hi)]
    else:
        grid = np.linspace(lo, hi, n) if hi > lo else np.array([lo])
    ys = np.vstack([np.interp(grid, t, v) for t, v in parts])
    return {"tau": grid, "mean": ys.mean(axis=0), "lo": ys.min(axis=0), "hi": ys.max(axis=0), "n": len(parts)}


def band_plan(curves: list[Curve | None]) -> dict | None:
    """`_band_plan` of the band of `curves`, without the frame between."""
    b = band_of(curves)
    if b is None:
        return None
    return {k: np.asarray(b[k], float) for k in ("tau", "mean", "lo", "hi")} | {"band": b["n"] > 1}


def eval_band(evals: list[pd.DataFrame], y: str = "metric") -> pd.DataFrame:
    """The evaluations averaged by their index: the k-th evaluation of every seed gives one point (mean τ,
    mean, min and max of the metric), for k up to the fewest evaluations any seed has."""
    seqs = []
    for e in evals:
        if e.empty or "tau" not in e or y not in e:
            continue
        tau, v = floats(e["tau"]), floats(e[y])
        keep = ~(np.isnan(tau) | np.isnan(v))  # dropna
        tau, v = tau[keep], v[keep]
        if not (tau[1:] >= tau[:-1]).all():  # not monotonic increasing: sorted, stably, as sort_values does
            order = np.argsort(tau, kind="stable")
            tau, v = tau[order], v[order]
        if len(tau):
            seqs.append((tau, v))
    if not seqs:
        return pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])
    if not all(t[0] == 0 for t, _ in seqs):  # a run folder written before the untrained model's evaluation at τ = 0
        seqs = [(t[t != 0], v[t != 0]) for t, v in seqs]  # has none: the k-th evaluations pair up without it
        seqs = [(t, v) for t, v in seqs if len(t)]
        if not seqs:
            return pd.DataFrame(columns=["tau", "mean", "lo", "hi", "n"])
    k = min(len(t) for t, _ in seqs)
    taus = np.vstack([t[:k] for t, _ in seqs])
    ys = np.vstack([v[:k] for _, v in seqs])
    return pd.DataFrame(
        {"tau": taus.mean(axis=0), "mean": ys.mean(axis=0), "lo": ys.min(axis=0), "hi": ys.max(axis=0), "n": len(seqs)}
    )


def smoothed(v: np.ndarray) -> np.ndarray:
    """The training loss smoothed by a centred rolling mean over ~5 % of the run's records."""
    window = max(1, len(v) // 20)
    return pd.Series(v).rolling(window, center=True, min_periods=1).mean().to_numpy(float)


def _draw_band(ax, b: pd.DataFrame, color, label: str, marker: str | None = None, **kw) -> bool:
    if b.empty:
        return False
    ax.plot(b["tau"], b["mean"], color=color, lw=kw.pop("lw", 1.8), label=label, marker=marker, ms=3, **kw)
    if (b["n"] > 1).any():
        ax.fill_between(b["tau"], b["lo"], b["hi"], color=color, alpha=0.2, lw=0)
    return True


def _band_plan(b: pd.DataFrame) -> dict | None:
    """A band as plain arrays (what a figure's plan holds and its hash covers); None when empty."""
    if b.empty:
        return None
    arrays = {k: b[k].to_numpy(float) for k in ("tau", "mean", "lo", "hi")}
    return arrays | {"band": bool((b["n"] > 1).any())}


def _draw_plan_band(ax, b: dict, color, label: str, marker: str | None = None, **kw) -> None:
    """_draw_band of a band in a plan."""
    ax.plot(b["tau"], b["mean"], color=color, lw=kw.pop("lw", 1.8), label=label, marker=marker, ms=3, **kw)
    if b["band"]:
        ax.fill_between(b["tau"], b["lo"], b["hi"], color=color, alpha=0.2, lw=0)

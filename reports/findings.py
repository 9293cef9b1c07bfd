"""The paper's findings as checks, each marked `holds`, `does not hold` or `not enough seeds` per task
(`not run` where there is nothing to compare), with the numbers compared. Statistical checks use the grey
rule's one-sided Welch t-test (`significance.worse_than`, α = 0.05, ≥ 2 finite seeds per side):

(i)   AdaScale's metric is within noise of S = 1 at every S: not significantly worse at any S > 1
      (a diverged AdaScale seed is a failure).
(ii)  LSW is worse than S = 1 at the largest S: significantly worse there, or a seed diverged.
(iii) AdaScale's iterations lie in [⌈T1/S⌉, T1] for every completed fixed-S run (a hard check: one
      seed suffices).
(iv)  AdaScale's gain rises during training (the emergent warm-up): for every AdaScale run with S > 1
      and a metrics.jsonl, the mean gain over the last quarter of its iterations > over the first quarter.
(v)   Elastic AdaScale is within noise of the fixed-S runs: elastic-up / elastic-down metric not
      significantly worse than the fixed run at S = the schedule's largest S.

The thresholds are the paper's claims as stated; nothing here is tuned to the results.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from .collect import ELASTIC, Results, scale_order, task_info
from .significance import ALPHA, worse_than
from .table2 import decimals, fmt_value, table_name, table_runs

HOLDS, FAILS, SEEDS, NOT_RUN = "holds", "does not hold", "not enough seeds", "not run"
CHECKS = {
    "i": "AdaScale within noise of S = 1 at every S",
    "ii": "LSW worse than S = 1 at the largest S",
    "iii": "AdaScale iterations in [T1/S, T1]",
    "iv": "AdaScale gain rises during training (emergent warm-up)",
    "v": "elastic AdaScale within noise of fixed S = max (else of S = 1)",
}
COLUMNS = ["table", "task", "preset", "check", "finding", "status", "detail"]


def _vals(g: pd.DataFrame) -> np.ndarray:
    x = pd.to_numeric(g.loc[g["status"] == "completed", "val_metric"], errors="coerce").to_numpy(float)
    return x[np.isfinite(x)]


def _ms(x: np.ndarray) -> str:
    if not len(x):
        return "–"
    m = float(np.mean(x))
    sd = f" ± {fmt_value(float(np.std(x, ddof=1)), decimals(m))}" if len(x) > 1 else ""
    return f"{fmt_value(m)}{sd} (n={len(x)})"


def _p(p: float) -> str:
    return "p = –" if not math.isfinite(p) else f"p = {p:.3g}"


def _fixed(t: pd.DataFrame, method: str) -> dict[str, pd.DataFrame]:
    g = t[(t["method"] == method) & t["scale"].map(lambda s: scale_order(s)[0] == 0)]
    return {s: g[g["scale"] == s] for s in sorted(g["scale"].unique(), key=scale_order)}


def _noise_check(pairs: list[tuple[str, pd.DataFrame, pd.DataFrame]], higher: bool, want_worse: bool) -> tuple:
    """pairs: (label, runs, baseline runs). want_worse False: holds when none is significantly worse (and
    none diverged); True: holds when every pair is significantly worse or diverged."""
    parts, statuses = [], []
    for label, g, base in pairs:
        x, b = _vals(g), _vals(base)
        n_div = int((g["status"] == "diverged").sum())
        if n_div:
            parts.append(f"{label}: {n_div} seed(s) diverged vs {_ms(b)}")
            statuses.append(HOLDS if want_worse else FAILS)
            continue
        worse, p = worse_than(x, b, higher)
        parts.append(f"{label}: {_ms(x)} vs {_ms(b)}, {_p(p)}")
        if not math.isfinite(p):
            statuses.append(SEEDS)
        else:
            statuses.append(HOLDS if worse == want_worse else FAILS)
    if not statuses:
        return NOT_RUN, "no runs to compare"
    if FAILS in statuses:
        return FAILS, "; ".join(parts)
    return (SEEDS if SEEDS in statuses else HOLDS), "; ".join(parts)


def check_i(t: pd.DataFrame, higher: bool, res: Results) -> tuple[str, str]:
    fixed = _fixed(t, "adascale")
    if "1" not in fixed:
        return NOT_RUN, "no AdaScale run at S = 1"
    pairs = [(f"S={s}", g, fixed["1"]) for s, g in fixed.items() if s != "1"]
    return _noise_check(pairs, higher, want_worse=False)


def check_ii(t: pd.DataFrame, higher: bool, res: Results) -> tuple[str, str]:
    fixed = _fixed(t, "lsw")
    if "1" not in fixed or len(fixed) < 2:
        return NOT_RUN, "no LSW runs at S = 1 and a larger S"
    top = list(fixed)[-1]
    return _noise_check([(f"S={top}", fixed[top], fixed["1"])], higher, want_worse=True)


def check_iii(t: pd.DataFrame, higher: bool, res: Results) -> tuple[str, str]:
    fixed = _fixed(t, "adascale")
    parts, bad = [], 0
    for s, g in fixed.items():
        done = g[g["status"] == "completed"].dropna(subset=["iterations", "T1"])
        if done.empty:
            continue
        S = float(s)
        T1 = float(done["T1"].iloc[0])
        lo = math.ceil(T1 / S - 1e-9)
        its = done["iterations"].astype(float)
        out = int(((its < lo) | (its > T1)).sum())
        bad += out
        rng = f"{its.min():.0f}" if its.min() == its.max() else f"{its.min():.0f}–{its.max():.0f}"
        parts.append(f"S={s}: {rng} in [{lo}, {T1:.0f}]" + (f" ({out} outside)" if out else ""))
    if not parts:
        return NOT_RUN, "no completed AdaScale runs"
    return (FAILS if bad else HOLDS), "; ".join(parts)


def gain_quarters(train: pd.DataFrame) -> tuple[float, float]:
    """(mean gain over the first quarter of the iterations, over the last quarter)."""
    if train.empty or "gain" not in train:
        return math.nan, math.nan
    g = pd.to_numeric(train["gain"], errors="coerce").to_numpy(float)
    g = g[np.isfinite(g)]
    q = len(g) // 4
    if q < 1:
        return math.nan, math.nan
    return float(g[:q].mean()), float(g[-q:].mean())


def check_iv(t: pd.DataFrame, higher: bool, res: Results) -> tuple[str, str]:
    parts, bad, n = [], 0, 0
    for s, g in _fixed(t, "adascale").items():
        if s == "1":
            continue
        for r in g[g["status"] == "completed"].sort_values("seed").itertuples():
            first, last = gain_quarters(res.metrics(r.run_dir)[0])
            if not (math.isfinite(first) and math.isfinite(last)):
                continue
            n += 1
            rises = last > first
            bad += not rises
            parts.append(f"S={s} seed {r.seed}: {first:.2f} → {last:.2f}")
    if not n:
        return NOT_RUN, "no AdaScale runs with S > 1 and recorded gains"
    return (FAILS if bad else HOLDS), "; ".join(parts)


def check_v(t: pd.DataFrame, higher: bool, res: Results) -> tuple[str, str]:
    fixed = _fixed(t, "adascale")
    pairs = []
    for e in ELASTIC:
        g = t[(t["method"] == "adascale") & (t["scale"] == e)]
        if g.empty:
            continue
        top = pd.to_numeric(g["max_scale"], errors="coerce").max()
        key = f"{top:g}" if math.isfinite(top) else None
        if key in fixed:
            pairs.append((f"{e} vs S={key}", g, fixed[key]))
        elif "1" in fixed:  # no fixed run at the elastic schedule's largest S: against S = 1, as Table 2 shades
            pairs.append((f"{e} vs S=1", g, fixed["1"]))
        else:
            pairs.append((f"{e} (no fixed S={key} or S=1 run)", g, g.iloc[0:0]))
    if not pairs:
        return NOT_RUN, "no elastic AdaScale runs"
    return _noise_check(pairs, higher, want_worse=False)


RULES: dict[str, Callable[[pd.DataFrame, bool, Results], tuple[str, str]]] = {
    "i": check_i,
    "ii": check_ii,
    "iii": check_iii,
    "iv": check_iv,
    "v": check_v,
}


def findings(res: Results) -> pd.DataFrame:
    """One row per table (task, preset, variant) × check."""
    df = table_runs(res.runs)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.assign(preset=df["preset"].fillna(""), variant=df["variant"].fillna(""))
    presets = df.groupby("task")["preset"].nunique()
    rows = []
    for (task, preset, variant), t in df.groupby(["task", "preset", "variant"], sort=True):
        _, higher = task_info(task, next(iter(t["metric"].dropna()), None), t)
        name = table_name(task, preset, variant, presets[task] > 1)
        for key, rule in RULES.items():
            status, detail = rule(t, higher, res)
            rows.append(
                {
                    "table": name,
                    "task": task,
                    "preset": preset,
                    "check": key,
                    "finding": CHECKS[key],
                    "status": status,
                    "detail": detail,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


LEGEND = (
    f"Welch t-test, one-sided, α = {ALPHA:g}, ≥ 2 seeds per side; mean ± std (n seeds). (iii) and (iv) are "
    "checked on every run. 'not enough seeds': a comparison lacked 2 seeds on a side and none failed."
)


def text(f: pd.DataFrame) -> str:
    """The table as printed by `report`: one block per table, one line per check."""
    if f.empty:
        return "findings: no Table 2 runs"
    out = []
    width = max(len(v) for v in CHECKS.values())
    for table, t in f.groupby("table", sort=False):
        out.append(f"{table}:")
        for r in t.itertuples():
            out.append(f"  ({r.check:>3}) {r.finding:<{width}}  {r.status:<16}  {r.detail}")
    return "\n".join(out) + "\n" + LEGEND


def to_csv(f: pd.DataFrame) -> str:
    return f.to_csv(index=False)

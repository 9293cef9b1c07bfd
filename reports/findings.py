"""The paper's findings as checks that can fail, per Table 2 table (task, preset, variant). Statuses
(docs/design.md §5): `holds` (a test that could have failed did not), `does not hold` (testable, and the
data contradicts the claim), `not testable here` (the regime the claim is about was not reached),
`inconclusive` (fewer than 3 seeds a side, the interval straddles the margin, or the runs disagree),
`not run`. Nothing here is tuned to any run's outcome.

Comparisons with S = 1 — (i), (ii), (v) — use the Welch interval of the difference of the means (one-sided
95 % bounds, i.e. the two-sided 90 % interval: the same α = 0.05 per side as Table 2's grey rule),
signed so that positive is better, against a margin Δ per metric:
- accuracy-like metrics (every higher-is-better metric here: top-1 %, word accuracy %, mAP %, BLEU):
  Δ = 0.5 points, the smallest shortfall the paper's Table 2 shows for a method it reports as degrading
  (cifar10 LSW S = 16: 93.6 vs 94.1; transformer LSW S = 64: 26.7 vs 27.2 BLEU), while AdaScale's
  largest shortfall there is 0.2 (cifar10 S = 64);
- losses (lower is better: logreg's full loss): Δ = 2 % of the S = 1 mean, the smallest relative loss
  rise the paper shows beside a degradation (transformer LSW S = 64: 1.63 vs 1.60).
`within`: lower bound > −Δ; `worse`: upper bound < −Δ; otherwise the interval straddles −Δ.

(i)   AdaScale non-inferior to S = 1 at every fixed S: every S `within` (a diverged seed: does not hold).
(ii)  LSW worse than S = 1 at its largest S: `worse` (or a seed diverged) holds, `within` does not.
      Testable only where that S·b exceeds the task's noise scale (B_simple, below): LSW degrades in the
      paper only where the total batch is past the noise scale; below it the finding is `not testable here`.
(iii) AdaScale's iterations follow the noise scale: ≈ ⌈T1/S⌉ where S·b ≪ B_simple, → T1 where S·b ≫ it.
      Per run, the speed-up T1/iterations against r̂ = S·(B/b + 1)/(B/b + S), the gain at the run's
      training-average B_simple (bench.algo.gain.steady_gain: σ²/μ² = B/b in the gain formula). Both
      as positions in the range [1, S] (u = (r − 1)/(S − 1): 1 is ⌈T1/S⌉ iterations, 0 is T1); holds when
      |u − û| ≤ 0.25, a quarter of the range: the claim places the count near one end or the other, and a
      quarter tells "near T1/S", "between" and "near T1" apart. It fails where the gain did not follow the
      noise scale (e.g. a gain stuck at 1 while S·b ≪ B), which the bound [T1/S, T1] never could.
(iv)  Emergent warm-up: over the first 10 % of τ (≤ 0.1·T1, the paper's warm-up spans the first few
      percent), the normalised gain u = (r − 1)/(r̂ − 1) starts at most 0.5 (mean over the window's first
      fifth of records: the lr multiplier begins less than halfway from S = 1's lr to where it settles)
      and rises by ≥ 0.2 by the window's last fifth (an estimate's jitter does not move its mean over a
      fifth of the window that far). r̂ is the gain the run's own training-average B_simple allows
      (bench.algo.gain.steady_gain; ≤ S, and S where B_simple is unknown): past the noise scale the gain
      settles near 1 + B_simple/b, far below S, so a range of [1, S] would fix the outcome at "does not
      hold" whatever the run did. Fewer than 5 records in the window: not testable.
(v)   Elastic AdaScale non-inferior to S = 1, as Table 2 shades: each elastic schedule `within`.

(iii) and (iv) judge each run: all hold → holds, none → does not hold, some → inconclusive.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bench.algo.gain import steady_gain

from . import noise
from .collect import ELASTIC, Results, scale_order, task_info
from .table2 import decimals, fmt_value, table_name, table_runs

HOLDS, FAILS, NOT_TESTABLE, INCONCLUSIVE, NOT_RUN = (
    "holds",
    "does not hold",
    "not testable here",
    "inconclusive",
    "not run",
)
STATUSES = (HOLDS, FAILS, NOT_TESTABLE, INCONCLUSIVE, NOT_RUN)
CHECKS = {
    "i": "AdaScale non-inferior to S = 1 at every S",
    "ii": "LSW worse than S = 1 at the largest S (S·b > B_simple)",
    "iii": "AdaScale iterations follow the noise scale (T1/S … T1)",
    "iv": "AdaScale gain starts low and rises (emergent warm-up)",
    "v": "elastic AdaScale non-inferior to S = 1",
}
COLUMNS = ["table", "task", "preset", "check", "finding", "status", "detail", "B_simple", "B_runs", "max_total_batch"]

CONFIDENCE = 0.90  # two-sided: one-sided 95 % bounds (α = 0.05 per side, as the grey rule)
MIN_SEEDS = 3
MARGIN_POINTS = 0.5  # accuracy-like metrics, in points (see the module docstring)
MARGIN_LOSS = 0.02  # losses, relative to the S = 1 mean
POSITION_TOLERANCE = 0.25  # (iii): a quarter of the range [T1/S, T1]
WARMUP_WINDOW = 0.10  # (iv): the first 10 % of τ
WARMUP_START = 0.5  # (iv): starts below half the range [1, r̂]
WARMUP_RISE = 0.2  # (iv): rises by a fifth of the range
WARMUP_MIN_RECORDS = 5
WITHIN, WORSE, STRADDLES, FEW = "within", "worse", "straddles", "too few seeds"


# ------------------------------------------------------------------------- comparisons with S = 1


def margin(higher_is_better: bool, base: np.ndarray) -> float:
    """Δ of a metric: 0.5 points for an accuracy-like metric, 2 % of the S = 1 mean for a loss."""
    if higher_is_better:
        return MARGIN_POINTS
    return MARGIN_LOSS * abs(float(np.mean(base))) if len(base) else math.nan


@dataclass
class Comparison:
    """x against the S = 1 runs, signed so that positive is better."""

    diff: float
    lo: float
    hi: float
    margin: float
    verdict: str  # WITHIN | WORSE | STRADDLES | FEW
    n: int
    n_base: int


def compare(x: np.ndarray, base: np.ndarray, higher_is_better: bool, delta: float | None = None) -> Comparison:
    """The Welch interval of mean(x) − mean(base) (positive = better) at CONFIDENCE, judged against −Δ."""
    x, base = np.asarray(x, float), np.asarray(base, float)
    x, base = x[np.isfinite(x)], base[np.isfinite(base)]
    sign = 1.0 if higher_is_better else -1.0
    delta = margin(higher_is_better, base) if delta is None else delta
    if not len(x) or not len(base):
        return Comparison(math.nan, math.nan, math.nan, delta, FEW, len(x), len(base))
    diff = sign * float(x.mean() - base.mean())
    lo = hi = math.nan
    if len(x) >= 2 and len(base) >= 2:
        if np.ptp(x) == 0 and np.ptp(base) == 0:  # no spread on either side: the difference is certain
            lo = hi = diff
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                ci = stats.ttest_ind(x, base, equal_var=False).confidence_interval(CONFIDENCE)
            lo, hi = sorted((sign * float(ci.low), sign * float(ci.high)))
    if len(x) < MIN_SEEDS or len(base) < MIN_SEEDS or not math.isfinite(lo):
        verdict = FEW
    elif lo > -delta:
        verdict = WITHIN
    elif hi < -delta:
        verdict = WORSE
    else:
        verdict = STRADDLES
    return Comparison(diff, lo, hi, delta, verdict, len(x), len(base))


def _vals(g: pd.DataFrame) -> np.ndarray:
    x = pd.to_numeric(g.loc[g["status"] == "completed", "val_metric"], errors="coerce").to_numpy(float)
    return x[np.isfinite(x)]


def _ms(x: np.ndarray) -> str:
    if not len(x):
        return "–"
    m = float(np.mean(x))
    sd = f" ± {fmt_value(float(np.std(x, ddof=1)), decimals(m))}" if len(x) > 1 else ""
    return f"{fmt_value(m)}{sd} (n={len(x)})"


def _signed(v: float, digits: int) -> str:
    return "–" if not math.isfinite(v) else f"{v:+.{digits}f}"


def describe(c: Comparison, x: np.ndarray, base: np.ndarray) -> str:
    """'74.10 ± 0.40 (n=3) vs 74.00 … (n=3): +0.10 [−0.52, +0.72] vs −Δ = −0.5 (within)'."""
    d = max(2, decimals(float(np.mean(base))) if len(base) else 2)
    interval = f" [{_signed(c.lo, d)}, {_signed(c.hi, d)}]" if math.isfinite(c.lo) else ""
    return f"{_ms(x)} vs {_ms(base)}: {_signed(c.diff, d)}{interval} vs −Δ = {_signed(-c.margin, d)} ({c.verdict})"


def _fixed(t: pd.DataFrame, method: str) -> dict[str, pd.DataFrame]:
    g = t[(t["method"] == method) & t["scale"].map(lambda s: scale_order(s)[0] == 0)]
    g = g[g["status"].isin(("completed", "diverged"))]
    return {s: g[g["scale"] == s] for s in sorted(g["scale"].unique(), key=scale_order)}


def _non_inferior(pairs: list[tuple[str, pd.DataFrame, pd.DataFrame]], higher: bool) -> tuple[str, str]:
    """(i), (v): every pair `within` holds; a diverged seed or a `worse` pair does not; else inconclusive."""
    parts, statuses = [], []
    for label, g, base in pairs:
        n_div = int((g["status"] == "diverged").sum())
        if n_div:
            parts.append(f"{label}: {n_div} seed(s) diverged")
            statuses.append(FAILS)
            continue
        x, b = _vals(g), _vals(base)
        c = compare(x, b, higher)
        parts.append(f"{label}: {describe(c, x, b)}")
        statuses.append({WITHIN: HOLDS, WORSE: FAILS}.get(c.verdict, INCONCLUSIVE))
    if not statuses:
        return NOT_RUN, "no runs to compare"
    status = FAILS if FAILS in statuses else INCONCLUSIVE if INCONCLUSIVE in statuses else HOLDS
    return status, "; ".join(parts)


def _aggregate(flags: list[bool]) -> str:
    return HOLDS if all(flags) else FAILS if not any(flags) else INCONCLUSIVE


# ---------------------------------------------------------------------------------------- checks


@dataclass
class Context:
    """What every check of one table sees."""

    t: pd.DataFrame
    higher: bool
    res: Results
    b_simple: float  # the task's noise scale: median training-average B_simple over its AdaScale runs
    b_runs: int


def check_i(ctx: Context) -> tuple[str, str]:
    fixed = _fixed(ctx.t, "adascale")
    if "1" not in fixed:
        return NOT_RUN, "no AdaScale run at S = 1"
    pairs = [(f"S={s}", g, fixed["1"]) for s, g in fixed.items() if s != "1"]
    return _non_inferior(pairs, ctx.higher)


def lsw_testable(total_batch: float, b_simple: float) -> bool:
    """(ii)'s regime: the total batch S·b is past the task's noise scale."""
    return math.isfinite(b_simple) and total_batch > b_simple


def check_ii(ctx: Context) -> tuple[str, str]:
    fixed = _fixed(ctx.t, "lsw")
    if "1" not in fixed or len(fixed) < 2:
        return NOT_RUN, "no LSW runs at S = 1 and a larger S"
    top = list(fixed)[-1]
    g, base = fixed[top], fixed["1"]
    b = pd.to_numeric(g["batch_size"], errors="coerce").dropna()
    total = float(top) * float(b.iloc[0]) if len(b) else math.nan
    regime = f"S·b = {total:,.0f} vs B_simple = {noise.fmt(ctx.b_simple)} (median of {ctx.b_runs} AdaScale run(s))"
    n_div = int((g["status"] == "diverged").sum())
    x, bv = _vals(g), _vals(base)
    numbers = f"{n_div} seed(s) diverged" if n_div else describe(compare(x, bv, ctx.higher), x, bv)
    if not math.isfinite(ctx.b_simple):
        return NOT_TESTABLE, f"no noise scale measured (no completed AdaScale run with S ≥ 2); S={top}: {numbers}"
    if not lsw_testable(total, ctx.b_simple):
        return NOT_TESTABLE, f"{regime}: S·b does not exceed the noise scale; S={top}: {numbers}"
    if n_div:
        return HOLDS, f"{regime}; S={top}: {numbers}"
    c = compare(x, bv, ctx.higher)
    status = {WORSE: HOLDS, WITHIN: FAILS}.get(c.verdict, INCONCLUSIVE)
    return status, f"{regime}; S={top}: {numbers}"


def iteration_position(iterations: float, T1: float, scale: float, b_simple: float, batch: float) -> tuple:
    """(observed u, predicted û) of one run: where T1/iterations and r̂(B_simple) sit in [1, S], as
    (r − 1)/(S − 1)."""
    r_obs = T1 / iterations
    r_hat = steady_gain(b_simple, batch, scale)
    return (r_obs - 1) / (scale - 1), (r_hat - 1) / (scale - 1)


def check_iii(ctx: Context) -> tuple[str, str]:
    runs = noise.per_run(ctx.t)
    runs = runs.dropna(subset=["iterations", "T1", "batch_size"])
    if runs.empty:
        done = _fixed(ctx.t, "adascale")
        if not any(s != "1" and (g["status"] == "completed").any() for s, g in done.items()):
            return NOT_RUN, "no completed AdaScale run with S ≥ 2"
        return NOT_TESTABLE, "no noise scale measured (no sum_sq / mean_sq statistics in metrics.jsonl)"
    parts, flags = [], []
    runs = runs.assign(_s=runs["scale"].map(lambda s: scale_order(s)[1])).sort_values(["_s", "seed"])
    for r in runs.itertuples():
        S, B, b = float(r.scale), float(r.B_simple), float(r.batch_size)
        u, u_hat = iteration_position(float(r.iterations), float(r.T1), S, B, b)
        ok = abs(u - u_hat) <= POSITION_TOLERANCE
        flags.append(ok)
        pred = float(r.T1) / steady_gain(B, b, S)
        parts.append(
            f"S={r.scale} seed {r.seed}: {r.iterations:.0f} its (u {u:.2f}) vs {pred:.0f} predicted at "
            f"B_simple {noise.fmt(B)}, S·b/B = {S * b / B if B else math.inf:.2g} (û {u_hat:.2f})"  # B = 0: no noise
            + ("" if ok else " ✗")
        )
    return _aggregate(flags), "; ".join(parts) + f"; |u − û| ≤ {POSITION_TOLERANCE:g}"


@dataclass
class Warmup:
    start: float  # normalised gain (r − 1)/(r̂ − 1) over the window's first fifth
    end: float  # … over its last fifth
    records: int
    holds: bool | None  # None: too few records to tell
    settles: float = math.nan  # r̂, the gain the run's B_simple allows (S where unknown)


def warmup(train: pd.DataFrame, scale: float, T1: float, settles: float | None = None) -> Warmup:
    """(iv) on one run's training records: the normalised gain over the first WARMUP_WINDOW of τ, against
    `settles` (r̂: the gain its noise scale allows; S when None)."""
    r_hat = float(scale) if settles is None or not math.isfinite(settles) else min(float(settles), float(scale))
    if train.empty or not {"tau", "gain"} <= set(train.columns) or not (r_hat > 1 and math.isfinite(T1)):
        return Warmup(math.nan, math.nan, 0, None, r_hat)
    d = train[["tau", "gain"]].apply(pd.to_numeric, errors="coerce").dropna()
    d = d[d["tau"] <= WARMUP_WINDOW * T1]
    n = len(d)
    if n < WARMUP_MIN_RECORDS:
        return Warmup(math.nan, math.nan, n, None, r_hat)
    u = (d["gain"].to_numpy(float) - 1) / (r_hat - 1)
    k = max(1, math.ceil(n / 5))
    start, end = float(u[:k].mean()), float(u[-k:].mean())
    return Warmup(start, end, n, start <= WARMUP_START and end - start >= WARMUP_RISE, r_hat)


def run_warmups(ctx_res: Results, t: pd.DataFrame) -> list[tuple[pd.Series, Warmup]]:
    """(run, Warmup) of every completed fixed-S AdaScale run with S ≥ 2 of a table."""
    out = []
    for s, g in _fixed(t, "adascale").items():
        if float(s) < 2:
            continue
        for _, r in g[g["status"] == "completed"].sort_values("seed").iterrows():
            if not bool(r["has_metrics"]):
                continue
            B = pd.to_numeric(pd.Series([r.get(noise.COLUMN)]), errors="coerce").iloc[0]
            r_hat = steady_gain(float(B), float(r["batch_size"]), float(s)) if np.isfinite(B) and B > 0 else None
            out.append((r, warmup(ctx_res.metrics(r["run_dir"])[0], float(s), float(r["T1"]), r_hat)))
    return out


def check_iv(ctx: Context) -> tuple[str, str]:
    ws = run_warmups(ctx.res, ctx.t)
    if not ws:
        return NOT_RUN, "no completed AdaScale run with S ≥ 2 and a metrics.jsonl"
    parts, flags = [], []
    for r, w in ws:
        if w.holds is None:
            parts.append(f"S={r['scale']} seed {r['seed']}: {w.records} record(s) in the first 10 % of τ")
            continue
        flags.append(w.holds)
        parts.append(
            f"S={r['scale']} seed {r['seed']}: {w.start:.2f} → {w.end:.2f} (r̂ {w.settles:.3g})"
            + ("" if w.holds else " ✗")
        )
    rule = (
        f"normalised gain (r − 1)/(r̂ − 1), r̂ the gain at the run's B_simple, first → last fifth of "
        f"τ ≤ {WARMUP_WINDOW:g}·T1"
    )
    if not flags:
        return NOT_TESTABLE, "; ".join(parts)
    return _aggregate(flags), "; ".join(parts) + f"; {rule}, holds: start ≤ {WARMUP_START:g}, rise ≥ {WARMUP_RISE:g}"


def check_v(ctx: Context) -> tuple[str, str]:
    fixed = _fixed(ctx.t, "adascale")
    pairs = []
    for e in ELASTIC:
        g = ctx.t[(ctx.t["method"] == "adascale") & (ctx.t["scale"] == e)]
        g = g[g["status"].isin(("completed", "diverged"))]
        if not g.empty:
            pairs.append((f"{e} vs S=1", g, fixed.get("1", g.iloc[0:0])))
    if not pairs:
        return NOT_RUN, "no elastic AdaScale runs"
    if "1" not in fixed:
        return NOT_RUN, "no AdaScale run at S = 1"
    return _non_inferior(pairs, ctx.higher)


RULES: dict[str, Callable[[Context], tuple[str, str]]] = {
    "i": check_i,
    "ii": check_ii,
    "iii": check_iii,
    "iv": check_iv,
    "v": check_v,
}


def _max_total_batch(t: pd.DataFrame) -> float:
    s = pd.to_numeric(t["scale"], errors="coerce") * pd.to_numeric(t["batch_size"], errors="coerce")
    s = s[np.isfinite(s)]
    return float(s.max()) if len(s) else math.nan


def findings(res: Results) -> pd.DataFrame:
    """One row per table (task, preset, variant) × check, with the task's B_simple beside it."""
    noise.fill(res)
    df = table_runs(res.runs)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.assign(preset=df["preset"].fillna(""), variant=df["variant"].fillna(""))
    presets = df.groupby("task")["preset"].nunique()
    rows = []
    for (task, preset, variant), t in df.groupby(["task", "preset", "variant"], sort=True):
        _, higher = task_info(task, next(iter(t["metric"].dropna()), None), t)
        name = table_name(task, preset, variant, presets[task] > 1)
        b, n = noise.task_value(t)
        ctx = Context(t, higher, res, b, n)
        for key, rule in RULES.items():
            status, detail = rule(ctx)
            rows.append(
                {
                    "table": name,
                    "task": task,
                    "preset": preset,
                    "check": key,
                    "finding": CHECKS[key],
                    "status": status,
                    "detail": detail,
                    "B_simple": b,
                    "B_runs": n,
                    "max_total_batch": _max_total_batch(t),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


LEGEND = (
    "(i), (ii), (v): difference from S = 1 (positive = better) with its Welch interval (one-sided 95 % "
    f"bounds) against the margin −Δ (Δ = {MARGIN_POINTS:g} points for accuracy-like metrics, "
    f"{MARGIN_LOSS:.0%} of the S = 1 mean for losses); ≥ {MIN_SEEDS} seeds a side, else inconclusive. "
    "(ii) is testable only where the largest S·b exceeds the task's B_simple. (iii) iterations against the "
    f"gain at the run's B_simple, positions in [T1/S, T1] within {POSITION_TOLERANCE:g}. (iv) normalised gain "
    f"over the first {WARMUP_WINDOW:.0%} of τ: starts ≤ {WARMUP_START:g}, rises ≥ {WARMUP_RISE:g}. "
    "B_simple = b·σ²/μ², training average per run (median over the task's AdaScale runs with S ≥ 2)."
)


def text(f: pd.DataFrame) -> str:
    """The table as printed by `report`: one block per table (with its B_simple), one line per check."""
    if f.empty:
        return "findings: no Table 2 runs"
    out = []
    width = max(len(v) for v in CHECKS.values())
    for table, t in f.groupby("table", sort=False):
        first = t.iloc[0]
        sb = first["max_total_batch"]
        out.append(
            f"{table}: B_simple {noise.fmt(first['B_simple'])} (median of {first['B_runs']} AdaScale run(s) "
            f"with S ≥ 2); largest S·b {'–' if not math.isfinite(sb) else f'{sb:,.0f}'}"
        )
        for r in t.itertuples():
            out.append(f"  ({r.check:>3}) {r.finding:<{width}}  {r.status:<17}  {r.detail}")
    return "\n".join(out) + "\n" + LEGEND


def to_csv(f: pd.DataFrame) -> str:
    return f.to_csv(index=False, float_format="%.6g")

"""Non-inferiority to S = 1, the rule findings (i), (ii), (v) and every rule's verdict judge by (docs/design.md §5):
the margin Δ of a table (`table_margin`: the task card's, in points or as a share of S = 1's distance to the
optimum) and the Welch interval of the difference of the means against it (`compare`: one-sided 95 % bounds,
signed so that positive is better, clipped to the metric's range). `within`: lower bound > −Δ; `worse`: upper
bound < −Δ; else it straddles −Δ; fewer than MIN_SEEDS a side decides nothing. reports.verdicts.findings says what each
finding asks of it."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from reports.rundata.collect import scale_order
from reports.stats.numbers import decimals, fmt_value

CONFIDENCE = 0.90  # two-sided: one-sided 95 % bounds (α = 0.05 per side, as the grey rule)
MIN_SEEDS = 3
ACCURACY_RANGE = (0.0, 100.0)  # every higher-is-better metric here is a percentage (BLEU included)
WITHIN, WORSE, STRADDLES, FEW = "within", "worse", "straddles", "too few seeds"


# ---------------------------------------------------------------------------------------- margins


@dataclass(frozen=True)
class Margin:
    """Δ of one table's metric, and how it was set (printed with every comparison)."""

    delta: float
    rule: str
    floor: float = -math.inf  # the metric's best possible value where it is bounded (a loss's optimum)
    ceiling: float = math.inf  # … (an accuracy's 100 %)
    share: float = 0.0  # > 0: Δ is this share of S = 1's distance to the optimum, estimated with it (`compare`)

    def bounds(self, higher_is_better: bool) -> tuple[float, float]:
        """(worst, best) values the metric can take."""
        return (self.floor, self.ceiling) if higher_is_better else (self.ceiling, self.floor)

    def room(self, base_mean: float, higher_is_better: bool) -> float:
        """How far S = 1's mean is from the best value the metric can take (inf where unbounded)."""
        best = self.bounds(higher_is_better)[1]
        return abs(best - base_mean) if math.isfinite(best) else math.inf

    def saturated(self, base_mean: float, higher_is_better: bool) -> bool:
        """S = 1 within Δ of the metric's best value: no run can be better by Δ, and a run as good as S = 1 is
        as good as any — a comparison there shows a drop, never that quality was kept (findings i, ii)."""
        return self.room(base_mean, higher_is_better) < self.delta


@functools.cache
def card_margin(task: str, preset: str) -> tuple[float | None, float | None]:
    """(the card's margin for `preset`, the metric's optimum) of a task; (None, None) for an unknown task."""
    try:
        from tasks.presets import card

        c = card(task)
    except Exception:  # a task this checkout does not know: the defaults below
        return None, None
    return c.margins.get(preset), c.optimum


def last_quarter_drop(curves: list[pd.DataFrame], T1: float) -> float:
    """The loss S = 1 sheds over its last quarter of τ: mean over its seeds of (the last evaluation at or
    before 0.75·T1, not the untrained model's at τ = 0: no drop of the last quarter) − (its last evaluation); NaN
    without both."""
    drops = []
    for ev in curves:
        if ev.empty or not {"tau", "metric"} <= set(ev.columns):
            continue
        d = ev[["tau", "metric"]].apply(pd.to_numeric, errors="coerce").dropna().sort_values("tau")
        early = d[(d["tau"] > 0) & (d["tau"] <= 0.75 * T1 * (1 + 1e-9))]
        if len(early) and len(d) and d["tau"].iloc[-1] > early["tau"].iloc[-1]:
            drops.append(float(early["metric"].iloc[-1] - d["metric"].iloc[-1]))
    return float(np.mean(drops)) if drops else math.nan


def table_margin(
    task: str,
    preset: str,
    higher_is_better: bool,
    base: np.ndarray,
    curves: list[pd.DataFrame] | None = None,
    T1: float = math.nan,
) -> Margin:
    """Δ of a table (module docstring): from the task card's margin for the preset, the S = 1 values `base` and,
    for a loss without a known optimum, S = 1's evaluation `curves`."""
    m, optimum = card_margin(task, preset)
    if higher_is_better:
        from tasks.presets import ACCURACY_MARGINS

        delta = m if m is not None else ACCURACY_MARGINS.get(preset, ACCURACY_MARGINS["paper"])
        return Margin(float(delta), f"Δ = {delta:g} points ({preset or 'any'} preset)", *ACCURACY_RANGE)
    share = 0.25 if m is None else float(m)
    mean = float(np.mean(base)) if len(base) else math.nan
    if optimum is not None:
        excess = mean - optimum
        return Margin(
            share * excess,
            f"Δ = {share:g} × S = 1's excess over the optimum {optimum:.6g} ({fmt_value(excess, 4)}), "
            "estimated with S = 1's mean",
            floor=float(optimum),
            share=share,
        )
    drop = last_quarter_drop(curves or [], T1)
    return Margin(
        share * drop if drop > 0 else math.nan,
        f"Δ = {share:g} × S = 1's drop over its last quarter of τ ({fmt_value(drop, 4)})",
        floor=0.0,
    )


# ------------------------------------------------------------------------- comparisons with S = 1


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
    p_worse: float = math.nan  # one-sided p of "worse": H0 d ≥ −Δ (small: worse); the `holm` step reads it
    p_drop: float = math.nan  # one-sided p of a drop at all: H0 d ≥ 0 (a saturated metric's test, `saturated`)


def welch(x: np.ndarray, base: np.ndarray, cx: float, cb: float) -> tuple[float, float, float]:
    """(estimate, standard error, Welch–Satterthwaite degrees of freedom) of cx·mean(x) + cb·mean(base), each
    side ≥ 2 values: with cx = 1, cb = −1 scipy's Welch interval of the difference of the means."""
    a = cx**2 * float(np.var(x, ddof=1)) / len(x)
    b = cb**2 * float(np.var(base, ddof=1)) / len(base)
    se = math.sqrt(a + b)
    df = (a + b) ** 2 / (a**2 / (len(x) - 1) + b**2 / (len(base) - 1)) if a + b > 0 else math.inf
    return cx * float(x.mean()) + cb * float(base.mean()), se, df


def compare(
    x: np.ndarray,
    base: np.ndarray,
    higher_is_better: bool,
    delta: float,
    limits: tuple[float, float] = (-math.inf, math.inf),
    share: float = 0.0,
) -> Comparison:
    """The Welch interval of mean(x) − mean(base) (positive = better) at CONFIDENCE, judged against −Δ.
    `limits`: the (worst, best) values the metric can take; the interval is clipped to the differences they
    allow (positive = better: at most best − mean(base), at least worst − mean(base)).

    `share` > 0: Δ is that share of S = 1's distance to the best value, Δ = share·|best − mean(base)| (logreg's
    excess loss), estimated from the same seeds it is compared with. Then the test is on d + Δ̂ =
    sign·(x̄ − (1 + share)·b̄ + share·best), whose standard error carries the base's spread (1 + share) times
    over — the margin's own uncertainty — and the interval printed for d is that of d + Δ̂ less Δ̂: the
    same verdict. Testing d against a Δ̂ taken as exact rejected 6–8 % of the time at the margin."""
    x, base = np.asarray(x, float), np.asarray(base, float)
    x, base = x[np.isfinite(x)], base[np.isfinite(base)]
    sign = 1.0 if higher_is_better else -1.0
    if not len(x) or not len(base):
        return Comparison(math.nan, math.nan, math.nan, delta, FEW, len(x), len(base))
    diff = sign * float(x.mean() - base.mean())
    share = share if math.isfinite(limits[1]) else 0.0  # a share of the distance to a best value there is
    if share > 0:
        delta = share * abs(limits[1] - float(base.mean()))
    lo = hi = p_worse = p_drop = math.nan
    if len(x) >= 2 and len(base) >= 2:
        if np.ptp(x) == 0 and np.ptp(base) == 0:  # no spread on either side: the difference is certain
            lo = hi = diff
            p_worse, p_drop = float(diff >= -delta), float(diff >= 0)  # 0: certainly worse / lower
        else:
            _, se, df = welch(x, base, sign, -sign * (1 + share))
            half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
            lo, hi = diff - half, diff + half
            p_worse, p_drop = (float(stats.t.cdf((diff + m) / se, df)) for m in (delta, 0.0))
            worst, best = (sign * (v - float(base.mean())) for v in limits)
            lo, hi = max(lo, min(worst, best)), min(hi, max(worst, best))
    if len(x) < MIN_SEEDS or len(base) < MIN_SEEDS or not math.isfinite(lo) or not math.isfinite(delta):
        verdict = FEW
    elif lo > -delta:
        verdict = WITHIN
    elif hi < -delta:
        verdict = WORSE
    else:
        verdict = STRADDLES
    return Comparison(diff, lo, hi, delta, verdict, len(x), len(base), p_worse, p_drop)


def saturated(c: Comparison) -> Comparison:
    """The comparison on a saturated metric (S = 1 within Δ of the best value, `Margin.saturated`): saturation
    replaces only `within` (the caller reads it as not testable: kept quality cannot show there). No run there
    can ever be shown to keep quality, so the test left is one that refutes: a drop that is significant (the
    upper bound below 0, one-sided 95 %) with its estimate past −Δ is `worse` (issue 53: S = 1 at 99.4 %, six
    seeds −1.40 [−2.31, −0.49] against −Δ = −1); an interval that straddles −Δ otherwise stays `straddles`."""
    if c.verdict == STRADDLES and c.hi < 0 and c.diff < -c.margin:
        return dataclasses.replace(c, verdict=WORSE, p_worse=c.p_drop)
    return c


def holm(p: list[float], alpha: float = (1 - CONFIDENCE) / 2) -> list[bool]:
    """Holm's step-down over k one-sided p-values at family-wise level `alpha`: the i-th smallest is rejected
    while every smaller one was and it is ≤ alpha/(k − i); NaN is never rejected. The "does not hold" side
    of a claim judged at several S (any of k `worse`) fires at 1 − 0.95^k at the margin without it."""
    order = sorted(range(len(p)), key=lambda i: p[i] if math.isfinite(p[i]) else math.inf)
    out = [False] * len(p)
    for rank, i in enumerate(order):
        if not (math.isfinite(p[i]) and p[i] <= alpha / (len(p) - rank)):
            break
        out[i] = True
    return out


def decision_power(
    sd: float,
    delta: float,
    n: int,
    diff: float = 0.0,
    n_base: int | None = None,
    sd_base: float | None = None,
) -> float:
    """The chance that a non-inferiority comparison (`compare`: n seeds spreading `sd` against n_base S = 1 seeds
    spreading sd_base, both by default the same) of a true difference `diff` (positive = better) ends `within`
    −Δ: its one-sided lower bound d̂ − t·SE above −Δ, i.e. the noncentral t of (d̂ + Δ)/SE, noncentrality
    (diff + Δ)/sqrt(sd²/n + sd_base²/n_base), past t(1 − α) at Welch–Satterthwaite's degrees of freedom (2n − 2
    for equal sides). By symmetry it is also the chance of `worse` for a true difference of −2Δ − diff. The
    positive control's seed counts come from it (docs/design.md §1): cheap S = 1 seeds may outnumber dear ones."""
    n_base = n if n_base is None else n_base
    sd_base = sd if sd_base is None else sd_base
    if min(n, n_base) < 2 or not (sd > 0 and sd_base > 0 and delta > 0):
        return math.nan
    a, b = sd**2 / n, sd_base**2 / n_base
    df = (a + b) ** 2 / (a**2 / (n - 1) + b**2 / (n_base - 1))
    ncp = (diff + delta) / math.sqrt(a + b)
    return float(stats.nct.sf(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, df), df, ncp))


def seeds_for(
    sd: float, delta: float, power: float = 0.8, diff: float = 0.0, most: int = 100, base_per_seed: int = 1
) -> int:
    """The fewest seeds n with `decision_power` ≥ `power` (and ≥ MIN_SEEDS), S = 1 having `base_per_seed` × n;
    `most` + 1 when none up to it."""
    for n in range(MIN_SEEDS, most + 1):
        if decision_power(sd, delta, n, diff, n_base=base_per_seed * n) >= power:
            return n
    return most + 1


DECIDE_POWER = 0.8  # the control's rule (docs/design.md §1): 80 % power at a true difference of 0
MOST_SEEDS = 100  # past it, a power calculation says "not reachable", not a number to run


PLAN_UPPER = 0.80  # the control plans on this one-sided upper confidence limit of the pilots' pooled sd


def pooled_sd(groups: list[np.ndarray]) -> tuple[float, int]:
    """(pooled sd, its degrees of freedom) of pilot groups, each about its own mean: every pilot seed of every
    earlier look counts (Σ (nᵢ − 1)·sᵢ² / Σ (nᵢ − 1)); (NaN, 0) without a group of ≥ 2 values."""
    groups = [np.asarray(g, float)[np.isfinite(np.asarray(g, float))] for g in groups]
    groups = [g for g in groups if len(g) >= 2]
    df = sum(len(g) - 1 for g in groups)
    if not df:
        return math.nan, 0
    return math.sqrt(sum(float(np.var(g, ddof=1)) * (len(g) - 1) for g in groups) / df), df


def sd_upper(sd: float, df: int, level: float = PLAN_UPPER) -> float:
    """The one-sided `level` upper confidence limit of a normal sd estimated with df degrees of freedom,
    sd·sqrt(df/χ²_{1−level}(df)): a plan on it reaches its power with chance ≥ level (Browne 1995), where one
    on the estimate itself does so about half the time (the control's 5-seed cifar10 sd 1.12: 95 % CI 0.67–3.22;
    realised 1.67, power 0.66 against a planned 0.80)."""
    if not (df >= 1 and sd > 0):
        return math.nan
    return sd * math.sqrt(df / float(stats.chi2.ppf(1 - level, df)))


@dataclass(frozen=True)
class Plan:
    """Seeds for one non-inferiority comparison planned on the pilots' spreads: each side's pooled sd, its
    degrees of freedom and upper limit, the cheapest (n, n_base) with DECIDE_POWER at a true 0 on those limits,
    and the power reached there (n > MOST_SEEDS: not reachable)."""

    sd: float
    df: int
    sd_hi: float
    sd_base: float
    df_base: int
    sd_base_hi: float
    n: int
    n_base: int
    power: float


def plan_seeds(x: list[np.ndarray], base: list[np.ndarray], delta: float, cost: float = 1.0) -> Plan:
    """The control's plan for one comparison (docs/design.md §1): every pilot seed pooled per side (`pooled_sd`),
    each side's sd at its PLAN_UPPER upper limit (`sd_upper`), and the allocation (n, n_base) of least cost
    n·cost + n_base (`cost`: one run of x in runs of the base) with `decision_power` ≥ DECIDE_POWER at a true
    difference of 0, each side ≤ MOST_SEEDS."""
    (sd, df), (sdb, dfb) = pooled_sd(x), pooled_sd(base)
    hi, hib = sd_upper(sd, df), sd_upper(sdb, dfb)
    best = (math.inf, MOST_SEEDS + 1, MOST_SEEDS + 1, math.nan)
    for n in range(MIN_SEEDS, MOST_SEEDS + 1):
        for m in range(MIN_SEEDS, MOST_SEEDS + 1):
            if n * cost + m >= best[0]:
                break
            p = decision_power(hi, delta, n, 0.0, n_base=m, sd_base=hib)
            if p >= DECIDE_POWER:
                best = (n * cost + m, n, m, p)
                break
    return Plan(sd, df, hi, sdb, dfb, hib, best[1], best[2], best[3])


def achieved_power(x: np.ndarray, base: np.ndarray, delta: float) -> float:
    """The power a comparison had at its realised spreads and seeds: `decision_power` at a true difference of 0
    with each side's observed sd and count (NaN below 2 seeds a side or without spread)."""
    x, base = np.asarray(x, float), np.asarray(base, float)
    if min(len(x), len(base)) < 2 or not (math.isfinite(delta) and delta > 0):
        return math.nan
    sd, sdb = float(np.std(x, ddof=1)), float(np.std(base, ddof=1))
    return decision_power(sd, delta, len(x), 0.0, n_base=len(base), sd_base=sdb) if sd > 0 and sdb > 0 else math.nan


def seeds_to_decide(x: np.ndarray, base: np.ndarray, delta: float) -> int | None:
    """The seeds a side that would decide a comparison at its observed spread: `seeds_for` (the control's power
    rule, a true difference of 0, 80 %) at the two sides' pooled sd against Δ. None where it cannot be said
    (< 2 seeds a side, no spread, no margin); MOST_SEEDS + 1 for "more than MOST_SEEDS". The one home of "how
    many seeds would decide": the findings, the rules grid and `advise` read it."""
    x, base = np.asarray(x, float), np.asarray(base, float)
    if min(len(x), len(base)) < 2 or not (math.isfinite(delta) and delta > 0):
        return None
    sd = math.sqrt((float(np.var(x, ddof=1)) + float(np.var(base, ddof=1))) / 2)
    if not (math.isfinite(sd) and sd > 0):
        return None
    return seeds_for(sd, delta, DECIDE_POWER, most=MOST_SEEDS)


def decide_text(n: int | None) -> str:
    """'~12 seeds a side would decide' (the rules grid's and the findings' words for `seeds_to_decide`)."""
    if n is None:
        return ""
    if n > MOST_SEEDS:
        return f"more than {MOST_SEEDS} seeds a side would be needed to decide"
    return f"~{n} seeds a side would decide"


def metric_values(g: pd.DataFrame) -> np.ndarray:
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


def _digits(c: Comparison, base: np.ndarray) -> int:
    """Enough decimals to show the margin (a loss margin of 0.001 needs 4)."""
    d = max(2, decimals(float(np.mean(base))) if len(base) else 2)
    if math.isfinite(c.margin) and c.margin > 0:
        d = max(d, 1 - math.floor(math.log10(c.margin)))
    return min(d, 6)


def describe(c: Comparison, x: np.ndarray, base: np.ndarray) -> str:
    """'74.10 ± 0.40 (n=3) vs 74.00 … (n=3): +0.10 [−0.52, +0.72] vs −Δ = −1.00 (within)'."""
    d = _digits(c, base)
    interval = f" [{_signed(c.lo, d)}, {_signed(c.hi, d)}]" if math.isfinite(c.lo) else ""
    said = f"{_ms(x)} vs {_ms(base)}: {_signed(c.diff, d)}{interval} vs −Δ = {_signed(-c.margin, d)} ({c.verdict})"
    if math.isfinite(p := achieved_power(x, base, c.margin)):
        said += f"; power at a true 0 at the realised spreads {p:.2f}"
    if c.verdict in (STRADDLES, FEW) and (n := seeds_to_decide(x, base, c.margin)) is not None:
        said += f"; {decide_text(n)} (80 % power at a true difference of 0, at the observed spread)"
    return said


def fixed_scales(t: pd.DataFrame, method: str) -> dict[str, pd.DataFrame]:
    g = t[(t["method"] == method) & t["scale"].map(lambda s: scale_order(s)[0] == 0)]
    g = g[g["status"].isin(("completed", "diverged"))]
    return {s: g[g["scale"] == s] for s in sorted(g["scale"].unique(), key=scale_order)}

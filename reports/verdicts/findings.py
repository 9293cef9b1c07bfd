"""The paper's findings as checks that can fail, per Table 2 table (task, preset, variant). Statuses
(docs/design.md §5): `holds` (a test that could have failed did not), `does not hold` (testable, and the
data contradicts the claim), `not testable here` (the regime the claim is about was not reached, or the
data cannot see it), `inconclusive` (fewer than 3 seeds a side, the interval straddles the margin, or the
runs disagree), `not run`. Every threshold below is fixed before any run; none is tuned to an outcome.

**Comparisons with S = 1** — (i), (ii), (v) — use the Welch interval of the difference of the means (one-sided
95 % bounds, i.e. the two-sided 90 % interval: the same α = 0.05 per side as Table 2's grey rule), signed so
that positive is better and clipped to what the metric's range allows (an accuracy cannot pass 100 %, a loss
cannot fall below its optimum), against a margin Δ (`table_margin`; the numbers and their reasons are on the
task cards, tasks.presets):
- accuracy-like metrics (top-1 %, word accuracy %, BLEU, mAP %): Δ in points per preset — paper 0.5, the
  smallest shortfall the paper's Table 2 shows for a method it reports as degrading; tiny 1.0, the least whole
  point a tiny validation set resolves (one seed's sampling error below Δ/2);
- a loss with a known optimum L* (logreg): Δ = δ·(mean S = 1 loss − L*), a share δ of the distance S = 1 itself
  leaves to the optimum (the excess loss is what a degraded run adds to; a share of the raw loss would be
  larger than S = 1's whole excess on a convex task that S = 1 nearly solves);
- a loss without one: Δ = δ·(the drop S = 1 makes over its last quarter of τ), its own evaluations.
`within`: lower bound > −Δ; `worse`: upper bound < −Δ; otherwise the interval straddles −Δ.

(i)   AdaScale non-inferior to S = 1 at every fixed S: every S `within` (a failed seed — diverged, or collapsed to
      chance, reports.rundata.failedseeds —: does not hold).
(ii)  LSW worse than S = 1 AND worse than AdaScale, at the largest S where both ran (`check_ii`): both `worse` (or
      a failed LSW seed where AdaScale has none) holds. LSW within Δ of AdaScale while worse than S = 1, or
      `within` S = 1, does not hold where LSW's multiplier S is past GAIN_RESOLUTION × AdaScale's measured steady
      gain there (that of its late noise scale, the one-sided upper bound over seeds): LSW stepped further than
      the noise allowed and did no worse. Where S is within that of AdaScale's gain, LSW takes AdaScale's steps
      and doing as well is what both rules predict: not testable. The regime (S against r̂) and whether S = 1
      sits near its tuned optimum are printed.
(iii) AdaScale's iterations follow the task's noise scale. Per S, its runs against the engine's estimator simulated
      around the moments at each run's own kept weights, measured apart from the engine's statistics (logreg's exact
      oracle, else the offline estimate through torch.func: bench.run.independent), the count and the multiplier
      over each third of τ, on an error model with its power (reports.verdicts.reference: the rule, what was
      measured). The
      other runs' noise (reports.stats.noise.predict) is printed as evidence, never judges; without a reference: not
      testable.
(iv)  Emergent warm-up: over the first 10 % of τ (≤ 0.1·T1: the paper's warm-up spans the first few percent),
      the normalised gain u = (r − 1)/(r̂ − 1) starts at most 0.5 (below half-way from S = 1's lr to where it
      settles) and rises by ≥ 0.2. r̂ is the steady gain of the run's late noise scale (the last third of τ,
      where the gain settles; ≤ S). Which gain: the online gain averages ~1000/S iterations, so it is judged
      only where the window spans ≥ 3 such memories; a shorter window is judged on the gain measured afresh at
      kept checkpoints inside it (offline_gain.csv: the exact gain where the task has one, else the offline
      estimate; a line over ≥ 3 points bootstrapped over them, reports.verdicts.warmup.offline_warmup), from the run or
      from a `gain` experiment run of the same configuration; else the check is `not testable here` — a lagging
      estimate says nothing about the gain itself (smoke logreg S = 8: exact 0.35 → 0.96 over the window,
      online 0.34 → 0.52). Judged only where a warm-up is predicted (reports.verdicts.warmup.gated): the table's initial
      noise scale B₀ (first 10 % of τ, its range over the runs) puts the gain's start at (r(B₀) − 1)/(r̂ − 1) ≤
      0.5; where S·b ≪ B₀ the gain starts where it settles and no warm-up is the noise's own prediction.
(v)   Elastic AdaScale non-inferior to S = 1, as Table 2 shades: each elastic schedule `within`; a `worse` one
      counts after Holm's correction across the schedules, as (i)'s S.

(iii) and (iv) judge each run: all hold → holds, none → does not hold, some → inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bench.core.algo.rules import ADASCALE, LSW, shared_at_s1
from reports.rundata.collect import ELASTIC, Results, scale_order
from reports.rundata.failedseeds import failed_text
from reports.stats import noise
from reports.stats.noninferiority import (
    CONFIDENCE,
    FEW,
    MIN_SEEDS,
    STRADDLES,
    WITHIN,
    WORSE,
    Comparison,
    Margin,
    card_margin,
    compare,
    describe,
    fixed_scales,
    holm,
    metric_values,
    table_margin,
)
from reports.stats.noninferiority import saturated as saturated_verdict
from reports.stats.significance import worse_than
from reports.tables.table2 import confirmatory, table_runs, tables
from reports.verdicts import reference
from reports.verdicts.warmup import (
    WARMUP_MEMORIES,
    WARMUP_MIN_POINTS,
    WARMUP_RISE,
    WARMUP_START,
    WARMUP_WINDOW,
    Warmup,
    gain_twins,
    in_place,
    run_warmups,
    settled_gain,
)

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
    "ii": "LSW worse than S = 1 and AdaScale at the largest S",
    "iii": "AdaScale iterations follow the noise scale",
    "iv": "AdaScale gain starts low and rises (emergent warm-up)",
    "v": "elastic AdaScale non-inferior to S = 1",
}
# One primary test per claim, named on the page (issue 53.8): what decides its status, and why the S it spans need
# no further correction or which one they get.
PRIMARY = {
    "i": "Welch non-inferiority at every S against −Δ (one-sided 95 %): holds when every S is within (an "
    "intersection–union test, no correction needed); does not hold when an S is worse after Holm's correction "
    "across the S",
    "ii": "LSW worse than S = 1 and worse than AdaScale at the same (largest common) S, each a Welch test against "
    "−Δ (one-sided 95 %; both must hold: no correction; one S: no Holm)",
    "iii": "per S, AdaScale's iterations and its multiplier over each third of τ against the engine's estimator "
    "simulated around the moments at the runs' own kept weights (exact oracle, else torch.func), within the error "
    "model's tolerance; holds when every S judged holds, does not hold when every S judged misses, and a mix is "
    "inconclusive (each S's tolerance is a 95 % band on four statistics with no correction across S, so one S's "
    "miss among S that hold is printed, not read as the claim failing); S without power are not judged",
    "iv": "per run, the normalised gain's start and rise over the first 10 % of τ where a warm-up is predicted; "
    "holds when every judged run holds, does not hold when every judged run fails, a mix or an undecided run is "
    "inconclusive (≥ 2 seeds decide)",
    "v": "Welch non-inferiority of each elastic schedule against −Δ, as (i): Holm across the schedules for "
    "does not hold",
}
COLUMNS = ["table", "task", "preset", "check", "finding", "status", "detail", "margin", "margin_rule", "noise"]
COLUMNS += ["B_lo", "B_hi", "B_top", "B_runs", "max_total_batch", "primary_test"]

ITERATION_TOLERANCE = 0.2  # the resolution (ii) grants its regime (the old (iii) tolerance)


# ------------------------------------------------------------------- comparisons as statuses


def verdict_of(c: Comparison) -> str:
    """A non-inferiority comparison's status: within holds, worse does not, anything else is inconclusive."""
    return {WITHIN: HOLDS, WORSE: FAILS}.get(c.verdict, INCONCLUSIVE)


def _non_inferior(pairs: list[tuple[str, pd.DataFrame, pd.DataFrame]], higher: bool, margin: Margin) -> tuple[str, str]:
    """(i), (v): every pair `within` holds (an intersection–union test: each pair at one-sided α = 0.05, no
    correction needed, since every one must pass); a failed seed (diverged or collapsed, reports.rundata.failedseeds)
    or a
    `worse` pair that survives Holm's correction across the pairs (`holm`: "any of k worse" at α family-wise) does
    not hold; else inconclusive. Where S = 1 sits within Δ of the metric's best value (`Margin.saturated`),
    saturation replaces only `within` (not testable: kept quality cannot show) and a significant drop past Δ is
    `worse` (noninferiority.saturated). A pair `within` Δ that Table 2 shades grey (significantly worse than
    S = 1, reports.stats.significance) says so: the two rules answer different questions."""
    parts: list[str] = []
    statuses: list[str] = []
    judged: list[tuple[int, Comparison]] = []
    saturated = False
    for label, g, base in pairs:
        if failed := failed_text(g):
            parts.append(f"{label}: {failed}")
            statuses.append(FAILS)
            continue
        x, b = metric_values(g), metric_values(base)
        c = compare(x, b, higher, margin.delta, margin.bounds(higher), margin.share)
        sat = bool(len(b)) and margin.saturated(float(np.mean(b)), higher)
        c = saturated_verdict(c) if sat else c
        grey = c.verdict == WITHIN and worse_than(x, b, higher)[0]
        note = " — significantly worse than S = 1 (Table 2's grey) by less than Δ" if grey else ""
        parts.append(f"{label}: {describe(c, x, b)}{note}")
        saturated |= sat
        judged.append((len(statuses), c))
        statuses.append(NOT_TESTABLE if sat and c.verdict == WITHIN else verdict_of(c))
    if not statuses:
        return NOT_RUN, "no runs to compare"
    decidable = [(i, c) for i, c in judged if c.verdict != FEW]
    for (i, c), kept in zip(decidable, holm([c.p_worse for _, c in decidable]), strict=True):
        if c.verdict == WORSE and not kept:
            statuses[i] = INCONCLUSIVE
            parts[i] += f" — not worse after Holm's correction across the {len(decidable)} compared (p {c.p_worse:.3g})"
    order = (FAILS, INCONCLUSIVE, NOT_TESTABLE)
    status = next((s for s in order if s in statuses), HOLDS)
    detail = "; ".join(parts) + f"; {margin.rule}"
    return status, f"{SATURATED}: {detail}" if saturated else detail


SATURATED = (
    "saturated (S = 1 within Δ of the metric's best value: a drop can show, kept quality cannot; a significant drop "
    "past Δ does not hold)"
)


def _aggregate(flags: list[bool]) -> str:
    return HOLDS if all(flags) else FAILS if not any(flags) else INCONCLUSIVE


# ---------------------------------------------------------------------------------------- checks


@dataclass
class Context:
    """What every check of one table sees."""

    t: pd.DataFrame
    higher: bool
    res: Results
    noise: noise.TaskNoise  # the task's noise scale over training (reports.stats.noise)
    margin: Margin


def check_i(ctx: Context) -> tuple[str, str]:
    fixed = fixed_scales(ctx.t, ADASCALE)
    if "1" not in fixed:
        return NOT_RUN, "no AdaScale run at S = 1"
    pairs = [(f"S = {s}", g, fixed["1"]) for s, g in fixed.items() if s != "1"]
    return _non_inferior(pairs, ctx.higher, ctx.margin)


GAIN_RESOLUTION = 1 + ITERATION_TOLERANCE  # (ii): a multiplier this much past AdaScale's gain is larger


def adascale_gain(t: pd.DataFrame, top: str) -> tuple[float, float, int]:
    """(mean, one-sided 95 % upper bound, seeds) of AdaScale's steady gain at scale `top` — the gain where it
    settles, S(B/b + 1)/(B/b + S) of each run's late noise scale (`settled_gain`, the last third of τ; S where μ²
    is not resolved): the step AdaScale measured it could take there, against which LSW's multiplier S is large
    or not ((ii)'s regime). The upper bound is NaN below 2 seeds."""
    g = fixed_scales(t, ADASCALE).get(top)
    late = noise.WINDOW_COLUMNS[-1]
    if g is None or late not in g:
        return math.nan, math.nan, 0
    g = g[g["status"] == "completed"]
    b, B = pd.to_numeric(g["batch_size"], errors="coerce"), pd.to_numeric(g[late], errors="coerce")
    ok = np.isfinite(b) & (b > 0) & B.notna()
    r = np.array([settled_gain(float(x), float(y), float(top)) for x, y in zip(B[ok], b[ok], strict=True)])
    if len(r) < 2:
        return (float(r[0]) if len(r) else math.nan), math.nan, len(r)
    sd = float(np.std(r, ddof=1))
    hi = float(r.mean()) + float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(r) - 1)) * sd / math.sqrt(len(r))
    return float(r.mean()), min(hi, float(top)), len(r)  # a steady gain never passes S


def _s1_tuning(t: pd.DataFrame, base: pd.DataFrame) -> str:
    """Whether S = 1 sits near its tuned optimum ((ii)'s and Δ's reference: an untuned S = 1 leaves a larger excess,
    Δ grows with it and a verdict can flip): on a task with an exact optimum (logreg) S = 1's excess loss over it;
    on every task S = 1's lr0 against the card's tuned lr0 for the preset."""
    first = t.iloc[0]
    task, preset = str(first["task"]), str(first["preset"] or "")
    said = []
    optimum = card_margin(task, preset)[1]
    bv = metric_values(base)
    if optimum is not None and len(bv):
        said.append(f"S = 1's excess loss over the exact optimum {float(np.mean(bv)) - optimum:.3g}")
    lr = pd.to_numeric(base["lr0"], errors="coerce").dropna() if "lr0" in base else pd.Series(dtype=float)
    try:
        from tasks.presets import card

        tuned = card(task).presets.get(preset, {}).get("lr_schedule", {}).get("lr0")
    except Exception:  # a task this checkout does not know
        tuned = None
    if len(lr) and isinstance(tuned, int | float):
        lr0 = float(lr.median())
        same = math.isclose(lr0, float(tuned), rel_tol=1e-9)
        said.append(f"S = 1 at lr0 {lr0:g}, " + ("the card's tuned lr0" if same else f"not the card's tuned {tuned:g}"))
    return "; ".join(said) or "S = 1's tuning unknown"


def _lsw_vs_adascale(ctx: Context, top: str, g: pd.DataFrame) -> tuple[str, str]:
    """(ii)'s comparative half: LSW against AdaScale at the same S (positive = LSW better), on the table's Δ —
    (WORSE | WITHIN | STRADDLES | FEW | "" where AdaScale has no run there, the words)."""
    a = fixed_scales(ctx.t, ADASCALE).get(top)
    if a is None or a.empty:
        return "", f"no AdaScale run at S = {top} to compare LSW with"
    lsw_failed, ada_failed = failed_text(g), failed_text(a)
    if lsw_failed or ada_failed:
        verdict = STRADDLES if lsw_failed and ada_failed else WORSE if lsw_failed else WITHIN
        return verdict, f"LSW vs AdaScale at S = {top}: LSW {lsw_failed or 'no failed seed'}, AdaScale " + (
            ada_failed or "no failed seed"
        )
    x, ax = metric_values(g), metric_values(a)
    c = compare(x, ax, ctx.higher, ctx.margin.delta, ctx.margin.bounds(ctx.higher))
    return c.verdict, f"LSW vs AdaScale at S = {top}: {describe(c, x, ax)}"


def check_ii(ctx: Context) -> tuple[str, str]:
    """(ii), comparative, at the largest S where LSW and AdaScale both ran — primary test: LSW `worse` than S = 1
    (or a failed seed) AND `worse` than AdaScale at the same S, both on the table's Δ (an intersection–union test:
    each at one-sided α = 0.05, one S, so no correction). LSW within Δ of AdaScale while both are worse than S = 1
    does not hold where LSW's multiplier S is past GAIN_RESOLUTION × AdaScale's measured steady gain r̂ there (its
    upper bound), and is not testable where S is within that (LSW takes AdaScale's steps). LSW `within` S = 1:
    does not hold past r̂ (LSW stepped further than the noise allowed and kept quality), not testable within it
    or on a saturated metric. The regime (S against r̂) and whether S = 1 is near its tuned optimum are printed."""
    lsw = fixed_scales(ctx.t, LSW)
    if "1" not in lsw or len(lsw) < 2:
        return NOT_RUN, "no LSW runs at S = 1 and a larger S"
    ada = fixed_scales(ctx.t, ADASCALE)
    top = ([s for s in lsw if s != "1" and s in ada] or list(lsw))[-1]
    g, base = lsw[top], lsw["1"]
    sat = False
    if failed := failed_text(g):
        vs1, numbers = WORSE, f"S = {top}: {failed}"
    else:
        x, bv = metric_values(g), metric_values(base)
        c = compare(x, bv, ctx.higher, ctx.margin.delta, ctx.margin.bounds(ctx.higher), ctx.margin.share)
        sat = bool(len(bv)) and ctx.margin.saturated(float(np.mean(bv)), ctx.higher)
        c = saturated_verdict(c) if sat else c
        vs1, numbers = c.verdict, f"S = {top}: {describe(c, x, bv)}"
    vs_a, against = _lsw_vs_adascale(ctx, top, g)
    r, r_hi, n = adascale_gain(ctx.t, top)
    S = float(top)
    regime = f"regime: LSW's multiplier S = {S:g} vs AdaScale's steady gain r̂ there {r:.3g} (upper bound {r_hi:.3g}"
    regime += f", n={n})"
    if not math.isfinite(r_hi):
        why = "no AdaScale run with a late noise scale" if not n else "one AdaScale seed (no interval)"
        regime = f"LSW's regime unknown at S = {top}: {why} to measure the gain there"
    detail = f"{numbers}; {against}; {regime}; {_s1_tuning(ctx.t, base)}; {ctx.margin.rule}"
    detail = f"{SATURATED}: {detail}" if sat else detail
    past = math.isfinite(r_hi) and S > GAIN_RESOLUTION * r_hi
    if vs1 == WORSE and vs_a == WORSE:
        return HOLDS, detail
    if vs1 == WITHIN and sat:
        return NOT_TESTABLE, detail
    if vs1 not in (WORSE, WITHIN) or (vs1 == WORSE and vs_a != WITHIN) or not math.isfinite(r_hi):
        return INCONCLUSIVE, detail
    if past:
        what = "as bad as AdaScale there" if vs1 == WORSE else "and kept S = 1's quality"
        return FAILS, f"{detail}: LSW stepped past r̂ {what}"
    return NOT_TESTABLE, f"{detail}: within ×{GAIN_RESOLUTION:g} of r̂ — LSW takes AdaScale's steps here"


def _fmt_its(v: float) -> str:
    return f"{v:.0f}" if math.isfinite(v) else "–"


def _small(r: pd.Series) -> bool:
    """Whether the run's S·b ≪ B (reports.stats.noise.SMALL_BATCH, None where unknown)."""
    v = r.get(noise.SMALL_BATCH)
    return isinstance(v, bool | np.bool_) and bool(v)


def _iii_cells(ctx: Context, runs: pd.DataFrame) -> tuple[dict[str, reference.Cell], int, int]:
    """Each S's cell judged against the runs' independent references (reports.verdicts.reference); how many runs had
    none,
    and how many had one over part of τ only (`reference.covers`)."""
    judged: dict[str, list[reference.RunJudged]] = {}
    missing = partial = 0
    for _, r in runs.iterrows():
        m = pd.to_numeric(pd.Series([r.get(noise.PER_EPOCH)]), errors="coerce").iloc[0]
        p = reference.points(ctx.res, r["run_dir"], float(m))
        if p is not None and not reference.covers(p, float(r["T1"])):
            partial += 1
            continue
        train = ctx.res.metrics(r["run_dir"])[0] if p is not None else None
        j = None
        if p is not None and train is not None:
            j = reference.judge_run(p, train, float(r["iterations"]), int(r["_s"]), float(r["T1"]), float(m))
        if j is None:
            missing += 1
            continue
        judged.setdefault(str(r["scale"]), []).append(j)
    return {s: reference.judge_cell(js) for s, js in judged.items()}, missing, partial


def _iii_evidence(runs: pd.DataFrame, scale: str, cell: reference.Cell | None = None) -> str:
    """What the other runs of the engine say at `scale` (reports.stats.noise.predict): evidence beside the reference,
    never a judge; donor scales whose predictions differ by more than the cell's tolerance are a finding."""
    g = runs[runs["scale"] == scale]
    mid = pd.to_numeric(g[noise.PREDICTED], errors="coerce").median()
    if not math.isfinite(mid):
        return ""
    lo = pd.to_numeric(g[noise.PREDICTED_LO], errors="coerce").min()
    hi = pd.to_numeric(g[noise.PREDICTED_HI], errors="coerce").max()
    source = g[noise.PREDICTED_FROM].dropna()
    by = f" ({source.iloc[0]})" if len(source) else ""
    text = f"; other runs' noise{by} predicts {_fmt_its(mid)} its (evidence only)"
    tol = float(cell.tol[0]) if cell is not None and len(cell.tol) else math.nan
    if math.isfinite(tol) and lo > 0 and math.log(hi / lo) > 2 * tol:
        text += f" — their scales disagree ({_fmt_its(lo)}–{_fmt_its(hi)} its, past ±{math.expm1(tol):.0%}): a finding"
    return text


CELL_TEXT = {
    "holds": "holds",
    "fails": "does not hold ✗",
    "no power": "not testable (no power)",
    "linear": "not testable (S·b ≪ B: AdaScale equals linear scaling here)",
}


def _iii_runs(ctx: Context) -> pd.DataFrame:
    """The table's completed fixed-S AdaScale runs with S ≥ 2, and its `gain` runs (the same training with its
    weights kept: reports.verdicts.warmup.gain_twins), each in place of the table's run of its S and seed."""

    def usable(t: pd.DataFrame) -> pd.DataFrame:
        fixed = t["scale"].map(lambda s: scale_order(s)[0] == 0 and scale_order(s)[1] >= 2).astype(bool)
        runs = t[fixed & (t["method"] == ADASCALE) & (t["status"] == "completed")]
        return runs[np.isfinite(pd.to_numeric(runs["iterations"], errors="coerce"))]

    return in_place(usable(ctx.t), usable(gain_twins(ctx.res, ctx.t)))


def check_iii(ctx: Context) -> tuple[str, str]:
    """(iii): each S's AdaScale runs against the run their independent reference predicts (reports.verdicts.reference:
    the exact moments at the kept weights where the task has an oracle, else the offline estimate through
    torch.func), the count and the gain over τ, on an error model with its power printed. The other runs'
    noise (reports.stats.noise.predict) is printed as evidence; it never judges."""
    runs = _iii_runs(ctx)
    if runs.empty:
        return NOT_RUN, "no completed AdaScale run with S ≥ 2"
    runs = runs.assign(_s=runs["scale"].map(lambda s: scale_order(s)[1])).sort_values(["_s", "seed"])
    cells, missing, partial = _iii_cells(ctx, runs)
    over_part = (
        f"; {partial} run(s) with weights kept over part of τ only (before {reference.COVERS:g}·T1): no reference "
        "for the rest of the run"
        if partial
        else ""
    )
    if not cells:
        said = {s: _iii_evidence(runs, s).removeprefix("; ") for s in runs["scale"].unique()}
        evidence = "".join(f"; S = {s}: {text}" for s, text in said.items() if text)
        return NOT_TESTABLE, (
            f"no reference independent of the engine's statistics for {missing + partial} run(s): keep their weights "
            "(keep_checkpoints_every) and run `adascale-bench gain` on them; other runs of the engine never replace it"
            + over_part
            + evidence
        )
    parts = [f"{reference.describe(s, c)}: {CELL_TEXT[c.verdict]}{_iii_evidence(runs, s, c)}" for s, c in cells.items()]
    verdicts = [c.verdict for c in cells.values()]
    decided = [v for v in verdicts if v in ("holds", "fails")]
    status = _aggregate([v == "holds" for v in decided]) if decided else NOT_TESTABLE
    rule = (
        "judged against the run's own kept weights' moments (exact oracle, else offline through torch.func), "
        "tol = run-to-run spread (the estimator simulated around the reference, or the seeds' if larger) ⊕ the "
        "reference's band (its estimate, its interpolation between kept points) ⊕ the draw order's size; no power "
        "where c on B from "
        f"{reference.POWER_LO:g} to {reference.POWER_HI:g} would pass"
    )
    return status, " | ".join(parts) + f"; {rule}" + (f"; {missing} run(s) without a reference" if missing else "") + (
        over_part
    )


GROUP = "{memories}"


def _seeds(runs: list[tuple[str, str]]) -> str:
    """'S=2 seeds 0, 1, 2; S=8 seed 0' of (scale, seed) pairs, in order."""
    by: dict[str, list[str]] = {}
    for scale, seed in runs:
        by.setdefault(scale, []).append(str(seed))
    return "; ".join(f"S = {s} seed{'s' if len(v) > 1 else ''} {', '.join(v)}" for s, v in by.items())


def check_iv(ctx: Context) -> tuple[str, str]:
    """(iv) per run (online where the window spans enough gain memories, else at kept checkpoints on the
    measurement's interval); a table's verdict needs runs of ≥ 2 seeds: one seed's gain run never decides it."""
    ws = run_warmups(ctx.res, ctx.t)
    if not ws:
        return NOT_RUN, "no completed AdaScale run with S ≥ 2 and a metrics.jsonl"
    parts, statuses, seeds_judged = [], [], set()
    skipped: dict[str, list[tuple[str, str]]] = {}
    lagging: list[Warmup] = []
    for r, w in ws:
        gain_run = r.get("experiment_kind") == "gain"
        name = f"S = {r['scale']} seed {r['seed']}" + (" (gain run)" if gain_run else "")
        if w.holds is None and not w.undecided:
            lags = math.isfinite(w.memories) and w.source == "online" and w.predicted != "no"
            why = f"the online gain lags, no kept checkpoints ({GROUP})" if lags else w.why
            lagging += [w] if lags else []
            skipped.setdefault(why, []).append((str(r["scale"]), f"{r['seed']}{' (gain run)' if gain_run else ''}"))
            continue
        seeds_judged.add(str(r["seed"]))
        statuses.append(INCONCLUSIVE if w.undecided else HOLDS if w.holds else FAILS)
        mark = " (undecided: " + w.why + ")" if w.undecided else "" if w.holds else " ✗"
        gate = f" [{w.gate}]" if w.gate else ""
        parts.append(
            f"{name}: {w.start:.2f} → {w.end:.2f} ({w.source}, {w.records} point(s); r̂ {w.settles:.3g}){mark}{gate}"
        )
    for why, runs in skipped.items():
        if GROUP in why:
            m = [w.memories for w in lagging]
            span = f"{min(m):.2g}" if min(m) == max(m) else f"{min(m):.2g}–{max(m):.2g}"
            why = why.replace(GROUP, f"the window spans {span} gain memories, < {WARMUP_MEMORIES}")
        parts.append(f"not judged, {_seeds(runs)}: {why}")
    rule = (
        f"normalised gain (r − 1)/(r̂ − 1), r̂ the steady gain of the run's late noise scale, over "
        f"τ ≤ {WARMUP_WINDOW:g}·T1; holds: start ≤ {WARMUP_START:g}, rise ≥ {WARMUP_RISE:g}; judged on the online "
        f"gain where the window spans ≥ {WARMUP_MEMORIES} gain memories (1000/S iterations), else on the exact or "
        f"offline gain at ≥ {WARMUP_MIN_POINTS} kept checkpoints in it, a line bootstrapped over them (resampled, "
        "each point moved within its interval); judged only where the table's initial noise scale (first 10 % of τ) "
        f"predicts a start ≤ {WARMUP_START:g}; runs of ≥ 2 seeds decide"
    )
    if not statuses:
        return NOT_TESTABLE, "; ".join(parts) + f"; {rule}"
    status = HOLDS if set(statuses) == {HOLDS} else FAILS if set(statuses) == {FAILS} else INCONCLUSIVE
    if len(seeds_judged) < 2:
        parts.append(f"judged on one seed only ({status} there): one seed's runs do not decide a table")
        status = INCONCLUSIVE
    return status, "; ".join(parts) + f"; {rule}"


def check_v(ctx: Context) -> tuple[str, str]:
    fixed = fixed_scales(ctx.t, ADASCALE)
    pairs = []
    for e in ELASTIC:
        g = ctx.t[(ctx.t["method"] == ADASCALE) & (ctx.t["scale"] == e)]
        g = g[g["status"].isin(("completed", "diverged"))]
        if not g.empty:
            pairs.append((f"{e} vs S = 1", g, fixed.get("1", g.iloc[0:0])))
    if not pairs:
        return NOT_RUN, "no elastic AdaScale runs"
    if "1" not in fixed:
        return NOT_RUN, "no AdaScale run at S = 1"
    return _non_inferior(pairs, ctx.higher, ctx.margin)


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


def margin_of(res: Results, t: pd.DataFrame, higher: bool) -> Margin:
    """The margin of one table, from its task card and its S = 1 runs (their values and, for a loss without a
    known optimum, their evaluation curves)."""
    first = t.iloc[0]
    shared = ADASCALE if _not_sgd(t) is None else shared_at_s1("adamw")  # S = 1: adamscale's run under AdamW
    base = fixed_scales(t, shared).get("1", t.iloc[0:0])
    curves: list[pd.DataFrame] = []
    done = base[base["status"] == "completed"] if len(base) else base
    if not higher and card_margin(str(first["task"]), str(first["preset"] or ""))[1] is None:
        curves = [res.metrics(d)[1] for d, m in zip(done["run_dir"], done["has_metrics"], strict=True) if m]
    T1 = float(pd.to_numeric(done["T1"], errors="coerce").median()) if len(done) else math.nan
    return table_margin(str(first["task"]), str(first["preset"] or ""), higher, metric_values(base), curves, T1)


# An AdamW table (spec `optimizer`): (i)–(v) are the paper's claims about momentum SGD and are not judged on it;
# the rules grid (reports.page.rulecompare) judges every rule there against S = 1 of the same optimizer. Its noise
# scale is left out: B = b·σ²/μ² is of the raw gradient, which SGD steps along; Adam steps along the
# preconditioned one, whose noise scale (AdaptDL's, which adamscale measures) the report does not define.
ADAM_CLAIMS = (
    "the paper's claims are about momentum SGD; not judged for this table's optimizer, {} (the rules grid judges "
    "each rule against S = 1 of the same optimizer)"
)
ADAM_NOISE = (
    "– (left out for {}: B = b·σ²/μ² is the raw gradient's, which SGD steps along; Adam steps along the "
    "preconditioned one)"
)


def _left_out(why: str) -> noise.TaskNoise:
    return noise.TaskNoise(dict.fromkeys(noise.WINDOW_COLUMNS, math.nan), math.nan, math.nan, 0, left_out=why)


def _not_sgd(t: pd.DataFrame) -> str | None:
    """The optimizer of a table's runs when it is not SGD (AdamW), else None."""
    other = sorted(set(t["optimizer"].dropna()) - {"sgd"}) if "optimizer" in t else []
    return ", ".join(other) or None


def findings(res: Results) -> pd.DataFrame:
    """One row per table (task, preset, variant) × check, with the table's margin and noise scale beside it."""
    noise.fill(res)
    df = table_runs(res.runs)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for tab in tables(df):
        t, refused = confirmatory(tab.runs)
        higher = tab.higher
        adam = _not_sgd(t)
        tn = noise.task_noise(t) if not adam else _left_out(ADAM_NOISE.format(adam))
        ctx = Context(t, higher, res, tn, margin_of(res, t, higher))
        for key, rule in RULES.items():
            status, detail = rule(ctx) if not adam else (NOT_TESTABLE, ADAM_CLAIMS.format(adam))
            detail = f"{detail}; {refused}" if refused else detail
            rows.append(
                {
                    "table": tab.name,
                    "task": tab.task,
                    "preset": tab.preset,
                    "check": key,
                    "finding": CHECKS[key],
                    "status": status,
                    "detail": detail,
                    "margin": ctx.margin.delta,
                    "margin_rule": ctx.margin.rule,
                    "noise": tn.text(),
                    "B_lo": tn.lo,
                    "B_hi": tn.hi,
                    "B_top": tn.top,
                    "B_runs": tn.runs,
                    "max_total_batch": _max_total_batch(t),
                    "primary_test": PRIMARY[key],
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


LEGEND = (
    "(i), (ii), (v): difference from S = 1 (positive = better) with its Welch interval (one-sided 95 % "
    "bounds, clipped to the metric's range) against the margin −Δ: accuracy-like metrics 0.5 points on "
    "paper presets, 1.0 on tiny ones (what a tiny validation set resolves); a loss δ × S = 1's excess over "
    "the known optimum (logreg δ = 0.25: the margin's own uncertainty in the interval), else × S = 1's drop over "
    f"its last quarter; ≥ {MIN_SEEDS} seeds a side, else inconclusive; a worse S counts after Holm's correction "
    "across the S; S = 1 within Δ of the metric's best value (saturated): within is not testable, a significant "
    "drop past Δ is worse. (ii) LSW worse than S = 1 and than AdaScale at the same S (or a failed seed: diverged, "
    "or collapsed) holds; LSW no worse than either does not "
    f"hold where its multiplier S is past ×{GAIN_RESOLUTION:g} AdaScale's measured steady gain there (of its late "
    "noise scale, upper bound), and is not testable where LSW takes AdaScale's steps. (iii) each S's iterations and "
    "multiplier over τ against the estimator simulated around the moments at the runs' own kept weights (exact "
    "oracle, else torch.func; `gain` on runs that keep weights), within the error model's tol, with the multipliers c "
    "on B that would pass (no power outside [0.8, 1.25]); other runs' noise: evidence only. "
    f"(iv) normalised gain over the first {WARMUP_WINDOW:.0%} of τ: starts ≤ "
    f"{WARMUP_START:g}, rises ≥ {WARMUP_RISE:g}, judged only where the initial noise scale predicts a warm-up; the "
    f"online gain where the window spans ≥ {WARMUP_MEMORIES} gain memories, else a line bootstrapped over the exact "
    "or offline gain at kept checkpoints, else not testable. Noise scale B = b·σ²/μ² "
    "per third of τ (τ-weighted, corrected for drawing without replacement; reports/stats/noise.py)."
)


def text(f: pd.DataFrame) -> str:
    """The table as printed by `report`: one block per table (its noise scale and margin), one line per check."""
    if f.empty:
        return "findings: no Table 2 runs"
    out = []
    width = max(len(v) for v in CHECKS.values())
    for table, t in f.groupby("table", sort=False):
        first = t.iloc[0]
        sb = first["max_total_batch"]
        out.append(
            f"{table}: noise scale {first['noise']}; largest S·b {'–' if not math.isfinite(sb) else f'{sb:,.0f}'}; "
            f"margin {first['margin_rule']}"
        )
        said = max(len(str(s)) for s in t["status"])
        for r in t.itertuples():
            out.append(f"  ({r.check:>3}) {r.finding:<{width}}  {r.status:<{said}}  {r.detail}")
            out.append(f"        primary test: {r.primary_test}")
    return "\n".join(out) + "\n" + LEGEND


def to_csv(f: pd.DataFrame) -> str:
    return f.to_csv(index=False, float_format="%.6g")

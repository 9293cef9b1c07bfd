"""`advise`'s rule advice: per rule and S, safe / at risk / unsafe, from the two mechanisms by which a rule's
steps fail, each measured by the probe, and which of them decided.

**(a) The noise scale over all of training.** AdaScale's gain at a noise scale B is S(B/b + 1)/(B/b + S)
(bench.algo.gain.steady_gain): the lr multiplier at which a step of S·b examples is worth S steps of b. A
rule whose multiplier (after its warm-up) runs past that gain by more than finding (ii)'s resolution at the
window of training where B is smallest (early, for most tasks: the gradient is large and consistent there)
takes steps larger than the batch's noise justifies there: **at risk**. Judged at the upper end of that
window's B interval, so only a multiplier past even the largest gain the probe allows is flagged (as (ii)
judges LSW against r_hi). The late noise scale alone, which the earlier advice read, is the largest of the
three and calls LSW "within AdaScale's gain" where it collapsed.

**(b) Step-size stability.** At the probe's initial weights and kept checkpoints, the loss's sharpness λ_max
(bench.run.sharpness: a bracket [lower, upper], the sample's bias each way) against the rule's lr there,
η(τ) = m_t·w_t·lr(τ) at the iteration t where the rule reaches τ (its warm-up included; AdaScale's m_t its gain
at S from the probe's moments just before τ, `_gain_at`): heavy-ball SGD is
stable only for η < 2(1 + β)/(λ_max + ω) (bench.algo.stability: derived there). Past the bound at the lower
estimate of λ_max: **unsafe** (the error along the sharpest direction grows geometrically: divergence, or a
jump to a flatter region at a worse loss); past it only at the upper estimate: **at risk**.

The verdict is the worse of the two; `mechanism` names what decided it, with its numbers. The weights are
the AdaScale probe's, at the same τ the rule would reach: the trajectories of rules that keep quality are
close on τ (the paper's premise); one that has already left it is flagged by then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.algo.gain import clamp, gain_from, steady_gain
from bench.algo.rules import METHODS
from bench.algo.schedules import ScaleSchedule
from bench.algo.stability import stability_bound
from bench.errors import UserError
from bench.methods import make_rule
from reports.verdicts.findings import GAIN_RESOLUTION

SAFE, AT_RISK, UNSAFE, NOT_JUDGED = "safe", "at risk", "unsafe", "not judged"
ORDER = {SAFE: 0, AT_RISK: 1, UNSAFE: 2}


@dataclass(frozen=True)
class Recipe:
    """What a rule's lr and its bound depend on: lr(τ) of S = 1, momentum β, weight decay ω, the batch b, T1."""

    lr: Callable[[float], float]
    momentum: float
    weight_decay: float
    batch_size: float
    T1: float


@dataclass(frozen=True)
class Curvature:
    """λ_max at one τ of the probe: the bracket [lo, hi] of bench.run.sharpness.Point."""

    tau: float
    lo: float
    hi: float


@dataclass(frozen=True)
class Verdict:
    """One rule at one S: the verdict, the mechanism that decided it (in words, with its numbers), and the
    numbers of both checks (NaN where not measured)."""

    rule: str
    scale: int
    verdict: str
    mechanism: str
    multiplier: float  # the rule's lr multiplier after its warm-up
    noise_gain: float  # AdaScale's gain at the smallest noise scale over training (its interval's upper end)
    noise_window: str  # which window that is
    lr_over_bound: float  # max over τ of η(τ) / bound at the upper λ_max (> 1: at risk)
    lr_over_bound_lo: float  # the same at the lower λ_max (> 1: unsafe)
    tau: float  # where lr_over_bound peaks


def smallest_noise(noise: Sequence[tuple[str, float, float, float]]) -> tuple[str, float]:
    """(window, B's upper end) of the window whose B estimate is smallest over training (reports.stats.noise
    windows); ("", NaN) where none is finite."""
    finite = [(B, name, hi) for name, B, _, hi in noise if math.isfinite(B) and B > 0]
    if not finite:
        return "", math.nan
    _, name, hi = min(finite)
    return name, hi


RECENT = 0.1  # AdaScale's gain at τ: the probe's moments over this share of T1 up to τ (a prediction window)


def _gain_at(
    profile: Sequence[tuple[float, float]], records: Sequence[tuple[float, float, float]], tau: float, T1: float,
    scale: int,
) -> float:  # fmt: skip
    """AdaScale's gain at S near τ (clamped as the engine clamps): from the probe's raw moments over its records in
    the RECENT share of T1 up to τ, as long as the prediction's windows and, like the engine's average, of the past
    only (at τ = 0 its first record: the gain the run starts with, before the rise a tenth's average already
    holds), else from the profile's tenth at τ."""
    if scale < 2:
        return 1.0
    near = [clamp(v, q) for t, v, q in records if tau - RECENT * T1 <= t <= tau]  # clamped, then averaged:
    if not near and records:  # as the engine folds them
        near = [clamp(*min(records, key=lambda r: abs(r[0] - tau))[1:])]
    if near:
        return gain_from(float(np.mean([v for v, _ in near])), float(np.mean([q for _, q in near])), scale)
    k = len(profile)
    j = min(max(int(tau / T1 * k), 0), k - 1)
    return gain_from(*clamp(*profile[j]), scale)


def judge(
    rule: str, scale: int, recipe: Recipe, noise: Sequence, profile: Sequence, points: Sequence[Curvature],
    T_AS: float, records: Sequence[tuple[float, float, float]] = (),
) -> Verdict:  # fmt: skip
    """The verdict of one rule at one S (module docstring); NOT_JUDGED where the rule cannot be built."""
    try:
        known = T_AS if math.isfinite(T_AS) else None
        r = make_rule(rule, ScaleSchedule.constant(scale), recipe.T1, T_AS=known, T=known)
    except UserError as e:
        return Verdict(rule, scale, NOT_JUDGED, str(e), *(math.nan,) * 2, "", *(math.nan,) * 3)

    def lr_at(tau: float) -> float:
        g = _gain_at(profile, records, tau, recipe.T1, scale)
        p = r.factors(0, scale, g)[1]
        m, _, w = r.factors(int(tau / p) if p > 0 else 0, scale, g)
        return m * w * recipe.lr(tau)

    g_end = _gain_at(profile, records, recipe.T1, recipe.T1, scale)
    m_late = r.factors(int(10 * recipe.T1), scale, g_end)[0]
    window, B_hi = smallest_noise(noise)
    row = METHODS.get(rule)
    uses_gain = row.uses_gain if row is not None else False
    r_noise = steady_gain(B_hi, recipe.batch_size, scale) if math.isfinite(B_hi) or B_hi == math.inf else math.nan
    past_noise = not uses_gain and math.isfinite(r_noise) and m_late > GAIN_RESOLUTION * r_noise
    ratio = lambda lam, tau: lr_at(tau) / stability_bound(lam, recipe.momentum, recipe.weight_decay)  # noqa: E731
    hi = [(ratio(c.hi, c.tau), c) for c in points if math.isfinite(c.hi)]
    lo = [ratio(c.lo, c.tau) for c in points if math.isfinite(c.lo)]
    top, at = max(hi, key=lambda x: x[0], default=(math.nan, None))
    top_lo = max(lo, default=math.nan)
    verdict = UNSAFE if top_lo > 1 else AT_RISK if top > 1 or past_noise else SAFE
    words = _mechanism(verdict, top, top_lo, at, lr_at, recipe, past_noise, m_late, r_noise, window)
    return Verdict(rule, scale, verdict, words, m_late, r_noise, window, top, top_lo, at.tau if at else math.nan)


def _mechanism(
    verdict: str, top: float, top_lo: float, at: Curvature | None, lr_at: Callable, recipe: Recipe,
    past_noise: bool, m: float, r_noise: float, window: str,
) -> str:  # fmt: skip
    """What decided the verdict, in words with its numbers (the stronger mechanism first)."""
    bound = "2(1+β)/(λ_max+ω)"
    parts = []
    if at is not None and top > 1:
        b_lo = stability_bound(at.hi, recipe.momentum, recipe.weight_decay)
        b_hi = stability_bound(at.lo, recipe.momentum, recipe.weight_decay)
        parts.append(
            f"stability: lr {lr_at(at.tau):.3g} at τ {at.tau:.0f} past {bound} = {b_lo:.3g}…{b_hi:.3g} "
            f"(λ_max {at.lo:.3g}…{at.hi:.3g})"
        )
    if past_noise:
        parts.append(
            f"noise scale: multiplier {m:.3g} past ×{GAIN_RESOLUTION:g} AdaScale's gain {r_noise:.3g} at the "
            f"{window} noise scale"
        )
    if parts:
        return "; ".join(parts)
    if not math.isfinite(top):
        return "noise scale: within AdaScale's gain at every window (stability not measured)"
    return f"within AdaScale's gain at every window; lr ≤ {top:.2g} of the stability bound"


def rule_advice(
    rules: Sequence[str], scales: Sequence[int], recipe: Recipe, noise: Sequence, profile: Sequence,
    points: Sequence[Curvature], T_AS: dict[int, float], records: Sequence[tuple[float, float, float]] = (),
) -> list[Verdict]:  # fmt: skip
    """One Verdict per rule and S > 1 (`T_AS`: AdaScale's predicted iterations per S, for the rules that take
    its count)."""
    return [
        judge(rule, S, recipe, noise, profile, points, T_AS.get(S, math.nan), records)
        for rule in dict.fromkeys(rules)
        for S in scales
        if S > 1
    ]


def csv_text(verdicts: Sequence[Verdict]) -> str:
    """rule_advice.csv: one row per rule and S."""
    import pandas as pd

    cols = ("rule", "scale", "verdict", "mechanism", "multiplier", "noise_gain", "noise_window", "lr_over_bound",
            "lr_over_bound_lo", "tau")  # fmt: skip
    return pd.DataFrame([[getattr(v, c) for c in cols] for v in verdicts], columns=list(cols)).to_csv(
        index=False, float_format="%.6g"
    )


def sharpness_csv(points: Sequence) -> str:
    """sharpness.csv: λ_max's bracket at each measured point of the probe (bench.run.sharpness.Point)."""
    lines = ["iteration,tau,scale,sharpness_lo,sharpness,products,examples"]
    lines += [
        f"{p.iteration},{p.tau:.6g},{p.scale},{p.sharpness_lo:.6g},{p.sharpness:.6g},{p.products},{p.examples}"
        for p in points
    ]
    return "\n".join(lines) + "\n"


def markdown_lines(verdicts: Sequence[Verdict], points: int) -> list[str]:
    """advice.md's rule advice: one line per rule and S, the verdict and what decided it."""
    if not verdicts:
        return []
    where = (
        f"the sharpness at {points} points of the probe (sharpness.csv)"
        if points
        else "no sharpness measured (the probe kept no weights)"
    )
    lines = [
        "## Rule advice",
        "",
        "Per rule and S, from (a) the noise scale over all of training (a multiplier past AdaScale's gain at the "
        f"smallest noise scale: at risk) and (b) step-size stability against {where}: lr past 2(1+β)/(λ_max+ω) "
        "at the lower estimate of λ_max: unsafe, at the upper one: at risk (reports.verdicts.ruleadvice).",
        "",
        "| rule | S | verdict | decided by |",
        "|---|---:|---|---|",
    ]
    lines += [f"| {v.rule} | {v.scale} | **{v.verdict}** | {v.mechanism} |" for v in verdicts]
    return lines + [""]

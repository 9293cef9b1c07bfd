"""`advise`'s rule advice: per rule and S, safe / at risk / unsafe, from the two mechanisms by which a rule's
steps fail, each measured by the probe, and which of them decided.

**(a) The noise scale over all of training.** AdaScale's gain at a noise scale B is S(B/b + 1)/(B/b + S)
(bench.core.algo.gain.steady_gain): the lr multiplier at which a step of S·b examples is worth S steps of b. A
rule whose multiplier (after its warm-up) runs past that gain by more than finding (ii)'s resolution at the
window of training where B is smallest (early, for most tasks: the gradient is large and consistent there)
takes steps larger than the batch's noise justifies there: **at risk**. Judged at the upper end of that
window's B interval, so only a multiplier past even the largest gain the probe allows is flagged (as (ii)
judges LSW against r_hi). The windows are the nearer probe's (in log S): the noise a run sees moves with its S
(bench.core.algo.transfer), and a probe 16 times larger than S measured a larger B than a run at S sees (logreg κ 1,
LSW at S = 8 lost S = 1's loss by 0.007 and read "within AdaScale's gain" against the S = 64 probe's windows).
The late noise scale alone, which the earlier advice read, is the largest of the
three and calls LSW "within AdaScale's gain" where it collapsed.

**(b) Step-size stability.** At the probe's initial weights and kept checkpoints, the loss's sharpness λ_max
(bench.run.sharpness: a bracket [lower, upper], the sample's bias each way) against the rule's lr there,
η(τ) = m_t·w_t·lr(τ) at the iteration t where the rule reaches τ (its warm-up included; AdaScale's m_t its gain
at S along the prediction's path, from the profile the prediction at S follows: the nearer probe's folded,
moved by the slope between the probes, reports.advice.Probes.profile_at; `gain_at`): heavy-ball SGD is
stable only for η < 2(1 + β)/(λ_max + ω) (bench.core.algo.stability: derived there). Past the bound at the lower
estimate of λ_max: **unsafe** (the error along the sharpest direction grows geometrically: divergence, or a
jump to a flatter region at a worse loss); past it only at the upper estimate: **at risk**. The probes themselves are
evidence against the bound: where one ran at an lr at least the rule's over the RECENT share of T1 up to τ and
ended neither diverged nor collapsed (`ran`), an lr past the bound there is **at risk**, not unsafe — the bound is
the linear model's, and the probe went through those weights at that lr and on (docs/design.md §4: tiny cifar10,
LSW at S = 16, lr 0.681 past 0.5…0.66 where a probe ran at 1.03 — its runs lost 1.4 points, no collapse).

The verdict is the worse of the two; `mechanism` names what decided it, with its numbers. The weights are
the AdaScale probe's, at the same τ the rule would reach: the trajectories of rules that keep quality are
close on τ (the paper's premise); one that has already left it is flagged by then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.core.algo.gain import steady_gain
from bench.core.algo.predict import gain_path
from bench.core.algo.rules import Rule
from bench.core.algo.schedules import ScaleSchedule
from bench.core.algo.stability import stability_bound
from bench.core.errors import UserError
from bench.core.methods import make_rule, method
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


RECENT = 0.1  # the probe's lr as evidence at τ: the largest it ran at over this share of T1 up to τ


def gain_at(profile: Sequence[tuple[float, float]], scale: int, T1: float) -> Callable[[float], float]:
    """AdaScale's gain at S as a function of τ: the prediction's own path (bench.core.algo.predict.gain_path on the
    probe's folded profile: the engine's moving average, its memory and clamp, as the count was predicted), the
    gain of the last iteration begun at or before τ. At the probe's S it is the probe's own gain (logreg κ 3,
    S = 64, τ 652: 23.0 logged; the mean of the records over the 10 % of T1 before τ, the former reading, said
    35.8: the engine's average remembers the larger μ² before). 1 at S < 2 or without a profile."""
    taus, gains = gain_path(profile, scale, T1) if scale >= 2 else (np.zeros(0), np.zeros(0))
    if not len(gains):
        return lambda tau: 1.0
    return lambda tau: float(gains[min(max(int(np.searchsorted(taus, tau, side="right")) - 1, 0), len(gains) - 1)])


def ran_at(ran: Sequence[tuple[float, float]], tau: float, T1: float) -> float:
    """The largest lr the probe ran at over the RECENT share of T1 up to τ (`ran`: its records' (τ, lr), empty
    where it diverged or collapsed); NaN where it has none there."""
    lrs = [lr for t, lr in ran if tau - RECENT * T1 <= t <= tau and math.isfinite(lr)]
    return max(lrs) if lrs else math.nan


def judge(
    rule: str, scale: int, recipe: Recipe, noise: Sequence, profile: Sequence, points: Sequence[Curvature],
    T_AS: float, ran: Sequence[tuple[float, float]] = (), favourable: float = 1.0,
) -> Verdict:  # fmt: skip
    """The verdict of one rule at one S (module docstring); NOT_JUDGED where the rule cannot be built. A rule that
    reads the gain is unsafe only at the favourable end of the prediction too: its gain from σ² × `favourable`
    (the interval's lower noise scale at this S, reports.advice.interval), as unsafe holds at λ's lower estimate."""
    try:
        known = T_AS if math.isfinite(T_AS) else None
        r = make_rule(rule, ScaleSchedule.constant(scale), recipe.T1, T_AS=known, T=known)
    except UserError as e:
        return Verdict(rule, scale, NOT_JUDGED, str(e), *(math.nan,) * 2, "", *(math.nan,) * 3)
    uses_gain = method(rule).uses_gain  # a user's rule too: make_rule has loaded it
    lr_at = _lr(r, scale, recipe, profile)
    lr_low = _lr(r, scale, recipe, [(favourable * v, q) for v, q in profile]) if uses_gain else lr_at
    m_late = r.factors(int(10 * recipe.T1), scale, gain_at(profile, scale, recipe.T1)(recipe.T1))[0]
    window, B_hi = smallest_noise(noise)
    r_noise = steady_gain(B_hi, recipe.batch_size, scale) if math.isfinite(B_hi) or B_hi == math.inf else math.nan
    past_noise = not uses_gain and math.isfinite(r_noise) and m_late > GAIN_RESOLUTION * r_noise
    bound = lambda lam: stability_bound(lam, recipe.momentum, recipe.weight_decay)  # noqa: E731
    hi = [(lr_at(c.tau) / bound(c.hi), c) for c in points if math.isfinite(c.hi)]
    lo = [(lr_low(c.tau) / bound(c.lo), c) for c in points if math.isfinite(c.lo)]
    top, at = max(hi, key=lambda x: x[0], default=(math.nan, None))
    top_lo = max((x for x, _ in lo), default=math.nan)
    survived = [c for x, c in lo if x > 1 and lr_low(c.tau) <= ran_at(ran, c.tau, recipe.T1)]
    unsafe = any(x > 1 and c not in survived for x, c in lo)
    verdict = UNSAFE if unsafe else AT_RISK if top > 1 or past_noise else SAFE
    words = _mechanism(verdict, top, top_lo, at, lr_at, recipe, past_noise, m_late, r_noise, window)
    if survived and not unsafe:
        c = survived[0]
        words += f" (a probe ran at lr {ran_at(ran, c.tau, recipe.T1):.3g} there and went on: not unsafe)"
    elif not unsafe and any(lr_at(c.tau) > bound(c.lo) for c in points if math.isfinite(c.lo)):
        worst = max((c for c in points if math.isfinite(c.lo)), key=lambda c: lr_at(c.tau) / bound(c.lo))
        words += f" (lr {lr_low(worst.tau):.3g} at the prediction's low noise scale, σ² × {favourable:.2f}: not unsafe)"
    return Verdict(rule, scale, verdict, words, m_late, r_noise, window, top, top_lo, at.tau if at else math.nan)


def _lr(r: Rule, scale: int, recipe: Recipe, profile: Sequence) -> Callable[[float], float]:
    """The rule's lr at τ, η(τ) = m_t·w_t·lr(τ) at the iteration t it reaches τ, with AdaScale's gain off `profile`."""
    gain = gain_at(profile, scale, recipe.T1)

    def lr_at(tau: float) -> float:
        g = gain(tau)
        p = r.factors(0, scale, g)[1]
        m, _, w = r.factors(int(tau / p) if p > 0 else 0, scale, g)
        return m * w * recipe.lr(tau)

    return lr_at


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
    rules: Sequence[str], scales: Sequence[int], recipe: Recipe, noise: Sequence | Callable[[int], Sequence],
    profile: Sequence | Callable[[int], Sequence], points: Sequence[Curvature], T_AS: dict[int, float],
    ran: Sequence[tuple[float, float]] = (), favourable: Callable[[int], float] = lambda S: 1.0,
) -> list[Verdict]:  # fmt: skip
    """One Verdict per rule and S > 1 (`profile`: the folded profile the prediction at S follows, one for every S
    or per S (reports.advice.Probes.profile_at); `T_AS`: AdaScale's predicted iterations per S, for the rules that
    take its count; `ran`: the probes' (τ, lr) where they ended neither diverged nor collapsed; `favourable`: the
    multiplier on σ² at the favourable end of the prediction per S; `noise`: the noise windows, one list for every S
    or per S — the nearer probe's, reports.advice.Probes.noise_at: the noise a run follows moves with its S)."""
    at = profile if callable(profile) else lambda S: profile
    windows = noise if callable(noise) else lambda S: noise
    return [
        judge(rule, S, recipe, windows(S), at(S), points, T_AS.get(S, math.nan), ran, favourable(S))
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

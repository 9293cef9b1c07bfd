"""advise's rule advice (reports.verdicts.ruleadvice): each mechanism decides where it should and names itself, on
numbers
built to sit on each side of each threshold."""

from __future__ import annotations

import math

from bench.core.algo.schedules import Constant
from bench.core.algo.stability import stability_bound
from reports.verdicts import ruleadvice as R

B, b = 32, 32  # the noise scale and batch of the profile below: B/b = 1 … 40 over the windows
PROFILE = tuple((1.0, 1.0 / 40) for _ in range(10))  # σ²/μ² = 40 everywhere: AdaScale's gain at S=16: 11.0
NOISE = [("early", 40 * b, 35 * b, 45 * b), ("middle", 60 * b, 50 * b, 70 * b), ("late", 80 * b, 70 * b, 95 * b)]


def recipe(lr0: float = 1.0, momentum: float = 0.0, wd: float = 0.0) -> R.Recipe:
    return R.Recipe(Constant(lr0), momentum, wd, float(b), 2000.0)


def verdict(rule: str, S: int, points: list[R.Curvature], **kw) -> R.Verdict:
    return R.judge(rule, S, recipe(**kw), NOISE, PROFILE, points, T_AS=2000 / S)


def test_lsw_past_the_stability_bound_is_unsafe_and_says_stability() -> None:
    """LSW at S = 32, lr0 1: lr 32 after its warm-up, past 2/λ even at λ's lower estimate (2/0.09 = 22)."""
    v = verdict("lsw", 32, [R.Curvature(0.0, 0.25, 0.3), R.Curvature(500.0, 0.09, 0.11)])
    assert v.verdict == R.UNSAFE and v.mechanism.startswith("stability") and v.tau == 500.0
    assert v.lr_over_bound_lo == 32 / stability_bound(0.09) > 1
    # at τ = 0 its warm-up holds lr at lr0: the initial sharpness (2/0.3 = 6.7 > 1) does not flag it


def test_lsw_below_the_bound_and_within_the_gain_is_safe() -> None:
    """LSW at S = 4 (lr 4 against 2/0.11 = 18; multiplier 4 within ×1.2 of AdaScale's 3.7 at the early B)."""
    v = verdict("lsw", 4, [R.Curvature(0.0, 0.25, 0.3), R.Curvature(500.0, 0.09, 0.11)])
    assert v.verdict == R.SAFE and v.lr_over_bound < 1, v


def test_between_the_brackets_ends_is_at_risk_by_stability() -> None:
    """lr 16 inside the bound's bracket 2/0.13 … 2/0.1 = 15.4 … 20: at risk, stability named first."""
    v = verdict("lsw", 16, [R.Curvature(500.0, 0.1, 0.13)])
    assert v.verdict == R.AT_RISK and v.mechanism.startswith("stability"), v


def test_momentum_widens_the_bound() -> None:
    """The same lr 32 at β = 0.9: 2(1.9)/0.11 = 34.5 > 32: no longer past it."""
    v = verdict("lsw", 32, [R.Curvature(500.0, 0.09, 0.11)], momentum=0.9)
    assert v.lr_over_bound < 1 and not v.mechanism.startswith("stability"), v


def test_a_multiplier_past_the_gain_at_the_smallest_noise_scale_is_at_risk_by_noise() -> None:
    """No sharpness measured; LSW at S = 16: multiplier 16 past ×1.2 AdaScale's gain at the early window's upper
    B (45·b: 16·46/61 = 12.1); the late window alone (95·b: 13.9 × 1.2 = 16.7) would have passed it."""
    v = verdict("lsw", 16, [])
    assert v.verdict == R.AT_RISK and v.mechanism.startswith("noise scale") and v.noise_window == "early", v
    assert v.noise_gain == 16 * 46 / 61
    assert math.isnan(v.lr_over_bound)
    sqrt = verdict("sqrt", 16, [])
    assert sqrt.verdict == R.SAFE and sqrt.multiplier == 4.0  # √S is within the gain


def test_adascale_is_never_past_its_own_gain_but_can_be_past_the_bound() -> None:
    assert verdict("adascale", 128, []).verdict == R.SAFE
    v = verdict("adascale", 128, [R.Curvature(500.0, 0.2, 0.25)])  # gain ≈ 30 × lr0 1 against 2/0.2 = 10
    assert v.verdict == R.UNSAFE and v.mechanism.startswith("stability")


def test_a_rule_that_cannot_be_built_is_not_judged() -> None:
    v = R.judge("lsw+", 8, recipe(), NOISE, PROFILE, [], T_AS=math.nan)
    assert v.verdict == R.NOT_JUDGED and "T_AS" in v.mechanism


def test_past_the_bound_where_the_probe_ran_at_that_lr_and_went_on_is_at_risk() -> None:
    """LSW at S = 32 (lr 32) past the bound at λ's lower estimate at τ 500 (2/0.09 = 22): unsafe — but where the
    probe ran at lr ≥ 32 over the 10 % of T1 before τ and ended neither diverged nor collapsed (`ran`), the linear
    bound is contradicted there: at risk, saying so. A probe that ran lower, or only long before, is no evidence."""
    points = [R.Curvature(500.0, 0.09, 0.11)]

    def judged(ran: list[tuple[float, float]]) -> R.Verdict:
        return R.judge("lsw", 32, recipe(), NOISE, PROFILE, points, T_AS=2000 / 32, ran=ran)

    assert judged([]).verdict == R.UNSAFE
    v = judged([(450.0, 33.0), (499.0, 30.0)])
    assert v.verdict == R.AT_RISK and "a probe ran at lr 33 there and went on: not unsafe" in v.mechanism, v
    assert judged([(450.0, 31.0)]).verdict == R.UNSAFE  # below the rule's lr 32
    assert judged([(100.0, 40.0)]).verdict == R.UNSAFE  # 400 τ before: outside the 10 % of T1 (200)
    assert judged([(520.0, 40.0)]).verdict == R.UNSAFE  # after τ: the weights there came after it


def test_adascales_gain_at_the_probes_scale_is_the_gain_it_ran_at() -> None:
    """gain_at on a profile of one constant noise scale settles at the steady gain S(B/b + 1)/(B/b + S)."""
    g = R.gain_at(PROFILE, 16, 2000.0)
    assert abs(g(1999.0) - 16 * 41 / 56) < 1e-6 and g(0.0) == g(-5.0)
    assert R.gain_at(PROFILE, 1, 2000.0)(500.0) == 1.0


def test_a_gain_rule_is_unsafe_only_at_the_predictions_favourable_end_too() -> None:
    """AdaScale at S = 128: gain 128·41/168 = 31.2 past 2/0.08 = 25 (λ's lower estimate): unsafe at the central
    noise scale; with σ² × 0.5, the prediction's low-noise end at this S, the gain is 128·21/148 = 18.2, within
    it: at risk, saying so. LSW's lr does not read the noise: the same end changes nothing for it."""
    points = [R.Curvature(500.0, 0.08, 0.12)]
    central = R.judge("adascale", 128, recipe(), NOISE, PROFILE, points, T_AS=math.nan)
    assert central.verdict == R.UNSAFE, central
    low = R.judge("adascale", 128, recipe(), NOISE, PROFILE, points, T_AS=math.nan, favourable=0.5)
    assert low.verdict == R.AT_RISK and "low noise scale, σ² × 0.50: not unsafe" in low.mechanism, low
    lsw = R.judge("lsw", 32, recipe(), NOISE, PROFILE, [R.Curvature(500.0, 0.09, 0.11)], T_AS=2000 / 32, favourable=0.5)
    assert lsw.verdict == R.UNSAFE


USER_GAIN_RULE = """from bench.core.algo.rules import AdaScale


class MINE(AdaScale):
    label, title, paper = "mine", "my gain rule", False
"""


def test_a_users_rule_that_reads_the_gain_is_judged_as_one(tmp_path, monkeypatch) -> None:
    """A rule of yours whose row says uses_gain is judged as AdaScale is (its row read through bench.core.methods, not
    the built-in table): unsafe only at the favourable end too, and never 'past AdaScale's gain' by the noise scale."""
    (tmp_path / "advice_gain_rule.py").write_text(USER_GAIN_RULE)
    monkeypatch.chdir(tmp_path)
    points = [R.Curvature(500.0, 0.08, 0.12)]
    v = R.judge("advice_gain_rule:MINE", 128, recipe(), NOISE, PROFILE, points, T_AS=math.nan, favourable=0.5)
    assert v.verdict == R.AT_RISK and "low noise scale" in v.mechanism and "noise scale: multiplier" not in v.mechanism


def test_the_noise_windows_are_the_nearer_probes() -> None:
    """rule_advice takes the noise windows per S (reports.advice.Probes.noise_at): LSW at S = 16 against a high probe's
    windows that saw B 4 times larger reads within AdaScale's gain (16·181/196 = 14.8 × 1.2 > 16), against the
    nearer probe's (NOISE) at risk by the noise scale — the same numbers as one list for every S give the latter."""
    high = [(w, 4 * B_, 4 * lo, 4 * hi) for w, B_, lo, hi in NOISE]
    per_s = R.rule_advice(["lsw"], [16, 128], recipe(), lambda S: NOISE if S < 64 else high, PROFILE, [], {})
    one = R.rule_advice(["lsw"], [16], recipe(), NOISE, PROFILE, [], {})
    far = R.rule_advice(["lsw"], [16], recipe(), high, PROFILE, [], {})
    assert per_s[0].verdict == one[0].verdict == R.AT_RISK and per_s[0].mechanism.startswith("noise scale")
    assert far[0].verdict == R.SAFE, far[0]

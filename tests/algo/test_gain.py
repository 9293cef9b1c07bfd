"""The gain estimators against sequences computed by hand from docs/design.md §1."""

from __future__ import annotations

import math

import pytest

from bench.core.algo.gain import RatioGain, UnbiasedGain, b_simple_average, steady_gain, theta


def test_scale_one_estimates_nothing() -> None:
    est = UnbiasedGain()
    assert est.update(5.0, 5.0, 1) == 1.0
    assert est.ema.updates == 0
    assert (est.var_avg, est.sqr_avg) == (0.0, 1.0)  # the values before the first update


def test_first_iteration_is_the_bias_corrected_sample() -> None:
    # S = 4, sum_sq = 10, mean_sq = 1: var = (10 - 4)/3 = 2, sqr = 1 - 2/4 = 0.5
    est = UnbiasedGain()
    r = est.update(10.0, 1.0, 4)
    assert est.var_avg == pytest.approx(2.0, rel=1e-12)
    assert est.sqr_avg == pytest.approx(0.5, rel=1e-12)
    assert r == pytest.approx((2 + 0.5) / (2 / 4 + 0.5), rel=1e-12)  # 2.5


def test_sqr_uses_the_unclamped_var_then_both_are_clamped() -> None:
    # S = 2, sum_sq = 1, mean_sq = 1: var = (1 - 2)/1 = -1 -> sqr = 1 - (-1)/2 = 1.5 (unclamped var!)
    # then var is clamped to 1e-6 and sqr stays 1.5
    est = UnbiasedGain()
    est.update(1.0, 1.0, 2)
    assert est.var_avg == pytest.approx(1e-6, rel=1e-9)
    assert est.sqr_avg == pytest.approx(1.5, rel=1e-12)
    # S = 2, sum_sq = 10, mean_sq = 1: var = 8, sqr = 1 - 4 = -3 -> clamped to 0
    est = UnbiasedGain()
    r = est.update(10.0, 1.0, 2)
    assert est.sqr_avg == 0.0
    assert r == pytest.approx(2.0)  # pure noise: the gain is S


def test_moving_average_with_theta_and_bias_correction() -> None:
    S = 8
    th = theta(S)
    assert th == pytest.approx(1 - 8 / 1000)
    samples = [(20.0, 2.0), (12.0, 1.0), (30.0, 3.5)]
    est = UnbiasedGain()
    raw_v = raw_s = 0.0
    for n, (sum_sq, mean_sq) in enumerate(samples, start=1):
        var = (sum_sq - S * mean_sq) / (S - 1)
        sqr = mean_sq - var / S
        var, sqr = max(var, 1e-6), max(sqr, 0.0)
        raw_v = th * raw_v + (1 - th) * var
        raw_s = th * raw_s + (1 - th) * sqr
        v, s = raw_v / (1 - th**n), raw_s / (1 - th**n)
        r = est.update(sum_sq, mean_sq, S)
        assert est.var_avg == pytest.approx(v, rel=1e-12)
        assert est.sqr_avg == pytest.approx(s, rel=1e-12)
        assert r == pytest.approx((v + s) / (v / S + s), rel=1e-12)
        assert 1.0 <= r <= S


def test_theta_is_zero_at_large_scale() -> None:
    assert theta(1000) == 0.0 and theta(2048) == 0.0
    est = UnbiasedGain()
    est.update(3000.0, 1.0, 2000)
    est.update(5000.0, 2.0, 2000)  # θ = 0: the average is the last sample
    var = (5000 - 4000) / 1999
    assert est.var_avg == pytest.approx(var)
    assert est.sqr_avg == pytest.approx(2.0 - var / 2000)


def test_change_of_scale_keeps_the_averages_and_corrects_with_the_product_of_thetas() -> None:
    est = UnbiasedGain()
    est.update(10.0, 1.0, 4)  # var 2, sqr .5
    est.update(40.0, 1.0, 16)  # var = (40 - 16)/15 = 1.6, sqr = 1 - .1 = .9
    t4, t16 = theta(4), theta(16)
    raw_v = t16 * ((1 - t4) * 2.0) + (1 - t16) * 1.6
    raw_s = t16 * ((1 - t4) * 0.5) + (1 - t16) * 0.9
    corr = 1 - t4 * t16
    assert est.var_avg == pytest.approx(raw_v / corr, rel=1e-12)
    assert est.sqr_avg == pytest.approx(raw_s / corr, rel=1e-12)
    # only S in the formula changes when the scale changes
    v, s = est.var_avg, est.sqr_avg
    assert est.gain(32) == pytest.approx((v + s) / (v / 32 + s))


def test_state_round_trip() -> None:
    a, b = UnbiasedGain(), UnbiasedGain()
    for x in [(10.0, 1.0), (8.0, 1.2)]:
        a.update(*x, 4)
    b.load_state_dict(a.state_dict())
    assert a.update(9.0, 1.1, 4) == b.update(9.0, 1.1, 4)


def test_ratio_estimator_of_section_3_4() -> None:
    S = 4
    est = RatioGain()
    r = est.update(10.0, 1.0, S)  # m1 = 10/4 = 2.5, m2 = 1
    assert r == pytest.approx((2.5 + 1e-6) / (1.0 + 1e-6), rel=1e-12)
    r = est.update(6.0, 2.0, S)  # m1 samples 2.5, 1.5; m2 samples 1, 2
    th = theta(S)
    m1 = (th * (1 - th) * 2.5 + (1 - th) * 1.5) / (1 - th**2)
    m2 = (th * (1 - th) * 1.0 + (1 - th) * 2.0) / (1 - th**2)
    assert r == pytest.approx((m1 + 1e-6) / (m2 + 1e-6), rel=1e-12)
    assert math.isnan(est.noise_scale(32))
    assert RatioGain().update(3.0, 3.0, 1) == 1.0


def test_ratio_estimator_stays_in_one_to_S() -> None:
    """Sampled moments can put (m1 + ε)/(m2 + ε) outside [1, S], where the true ratio never is."""
    assert RatioGain().update(2, 1e-3, 2) == 2.0  # 999 unclamped: m1 = 1, m2 = 0.001
    assert RatioGain().update(2, 5.0, 2) == 1.0  # below 1 unclamped: m1 = 1, m2 = 5
    inside = RatioGain().update(10.0, 1.0, 4)  # m1 = 2.5, m2 = 1: inside, unchanged
    assert inside == pytest.approx((2.5 + 1e-6) / (1.0 + 1e-6), rel=1e-12)


def test_noise_scale() -> None:
    est = UnbiasedGain()
    est.update(10.0, 1.0, 4)  # var 2, sqr .5
    assert est.noise_scale(32) == pytest.approx(32 * 2 / 0.5)


def test_b_simple_average_is_the_ratio_of_the_summed_moments() -> None:
    # S = 4: (10, 1) -> var 2, sqr .5; (7, 1) -> var 1, sqr .75; S = 1 and NaN records are left out
    recs = [(10.0, 1.0, 4), (7.0, 1.0, 4), (3.0, 3.0, 1), (math.nan, 1.0, 4)]
    assert b_simple_average(recs, 32) == pytest.approx(32 * (2 + 1) / (0.5 + 0.75))
    assert math.isnan(b_simple_average([(3.0, 3.0, 1)], 32))  # no iteration with S ≥ 2
    assert b_simple_average([(10.0, 0.5, 4)], 32) == math.inf  # var 3, sqr -.25: noise swamps the mean


def test_steady_gain_spans_one_to_s_with_the_noise_scale() -> None:
    # r = S(B/b + 1)/(B/b + S); b = 16, S = 8
    assert steady_gain(16 * 3, 16, 8) == pytest.approx(8 * 4 / 11)
    assert steady_gain(1e9, 16, 8) == pytest.approx(8, rel=1e-6)  # S·b ≪ B: the full S
    assert steady_gain(1e-9, 16, 8) == pytest.approx(1, rel=1e-6)  # b ≫ B: no gain
    assert steady_gain(math.inf, 16, 8) == 8

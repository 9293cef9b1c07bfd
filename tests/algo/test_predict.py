"""bench.core.algo.predict against the engine's own estimator stepped iteration by iteration: the closed form per
window must give the same iterations as folding each iteration's moments into UnbiasedGain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.core.algo import predict
from bench.core.algo.gain import UnbiasedGain
from bench.core.algo.predict import iterations_following, iterations_following_each


def stepped(parts, scale: int, T1: float) -> int:
    """The definition: fold the moments of the tenth τ is in, advance τ by the gain, until T1."""
    est, tau, iterations = UnbiasedGain(), 0.0, 0
    while tau < T1 * (1 - 1e-9):
        sigma2, mu2 = parts[min(int(tau / T1 * len(parts)), len(parts) - 1)]
        tau += est.fold(sigma2, mu2, scale)
        iterations += 1
    return iterations


def test_the_closed_form_equals_the_stepped_estimator():
    rng = np.random.default_rng(0)
    for _ in range(200):
        parts = [(float(rng.lognormal(0, 2)), float(rng.lognormal(-2, 2)) * (rng.random() > 0.1)) for _ in range(10)]
        scale, T1 = int(rng.choice([2, 4, 8, 64, 128, 1000, 2000])), float(rng.choice([100, 2000, 7777]))
        assert iterations_following(parts, scale, T1) == stepped(parts, scale, T1)


def test_the_limits_of_the_steady_gain():
    """S·b ≪ B (μ² ≈ 0): ≈ T1/S plus the average's warm-up; b ≫ B (σ² ≈ 0): T1."""
    assert iterations_following([(1.0, 0.0)] * 10, 8, 2000) == pytest.approx(250, rel=0.02)
    assert iterations_following([(0.0, 1.0)] * 10, 8, 2000) == 2000


@pytest.mark.parametrize("rows", [64, 3])  # in blocks of ROWS profiles: the same counts
def test_profiles_stepped_side_by_side_count_as_each_alone(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """iterations_following_each steps its rows together, each with its own chunks: every count is the stepped
    estimator's, whatever the other rows (a run at the gain's plateau beside one that crawls at a gain of 1),
    and a row without finite moments is NaN without touching the others."""
    monkeypatch.setattr(predict, "ROWS", rows)
    rng = np.random.default_rng(1)
    for scale, T1 in ((2, 7777.0), (8, 2000.0), (128, 100.0), (1000, 7777.0)):
        parts = [
            [(float(rng.lognormal(0, 2)), float(rng.lognormal(-2, 2)) * (rng.random() > 0.1)) for _ in range(10)]
            for _ in range(12)
        ]
        parts += [[(1.0, 0.0)] * 10, [(0.0, 1.0)] * 10, [(math.nan, 1.0)] * 10, [], [(1.0, 1.0)] * 3]
        got = iterations_following_each(parts, scale, T1)
        want = [stepped(p, scale, T1) if p and all(map(math.isfinite, np.ravel(p))) else math.nan for p in parts]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", [[(math.nan, 1.0)] * 10, [(math.inf, 1.0)] * 10, []])
def test_no_prediction_without_finite_moments(bad):
    assert math.isnan(iterations_following(bad, 8, 2000))
    assert math.isnan(iterations_following([(1.0, 1.0)] * 10, 1, 2000))
    assert math.isnan(iterations_following([(1.0, 1.0)] * 10, 8, -5.0))


# ------------------------------------------------------------------- the engine's view (finding (iii), issue 53)


def test_gain_path_is_the_prediction_one_iteration_at_a_time():
    """gain_path's iterations are iterations_following's count, and its gains are the estimator's."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        parts = [(float(rng.lognormal(0, 1)), float(rng.lognormal(-2, 1))) for _ in range(10)]
        scale, T1 = int(rng.choice([2, 16, 64])), float(rng.choice([500, 2000]))
        taus, gains = predict.gain_path(parts, scale, T1)
        assert len(taus) == iterations_following(parts, scale, T1) == stepped(parts, scale, T1)
        assert (
            taus[0] == 0 and np.allclose(np.diff(taus), gains[:-1]) and np.all((gains >= 1) & (gains <= scale + 1e-9))
        )


def gaussian_statistics(rng, G: np.ndarray, C: np.ndarray, scale: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n iterations' (var̂, sqr̂) of `scale` Gaussian micro-batch gradients N(G, C) (C diagonal), as
    bench.core.algo.gain.moments computes them."""
    from bench.core.algo.gain import moments

    g = G + rng.standard_normal((n, scale, len(G))) * np.sqrt(np.diag(C))  # C diagonal
    sum_sq = (g**2).sum(axis=(1, 2))
    mean_sq = (g.mean(axis=1) ** 2).sum(axis=1)
    return moments(sum_sq, mean_sq, scale)


@pytest.mark.parametrize("scale", [2, 8, 64])
def test_engine_moments_is_the_mean_of_the_clamped_estimates(scale: int):
    """The modelled bias against a Monte Carlo of the engine's estimates: E[max(sqr̂, 0)] where μ² is small against
    sqr̂'s spread (late training), Gaussian micro-batch gradients in 6 dimensions with an anisotropic C."""
    rng = np.random.default_rng(scale)
    C = np.diag([1.0, 0.5, 0.3, 0.2, 0.1, 0.05]) * 0.01
    G = np.full(6, 0.004)
    var, sqr = gaussian_statistics(rng, G, C, scale, 40_000 if scale < 64 else 10_000)
    model = predict.engine_moments(float(np.trace(C)), float(G @ G), float(np.sum(C * C)), float(G @ C @ G), scale)
    clamped = float(np.maximum(sqr, 0).mean())
    se = float(np.maximum(sqr, 0).std()) / math.sqrt(len(sqr))
    assert model[0] == pytest.approx(float(np.trace(C)))
    assert abs(model[1] - clamped) < 0.15 * clamped, (model[1], clamped)  # the Gaussian closed form: ±15 %
    ones = np.ones(len(sqr))
    v, q = predict.draw_statistics(rng, np.trace(C) * ones, G @ G * ones, np.sum(C * C) * ones, G @ C @ G * ones, scale)
    drawn = float(np.maximum(q, 0).mean())  # the simulation's draws: the clamp's mean within the Monte Carlo's error
    assert abs(drawn - clamped) < 4 * math.hypot(se, float(np.maximum(q, 0).std()) / math.sqrt(len(q))) + 0.03 * clamped
    assert abs(float(v.mean()) / float(var.mean()) - 1) < 0.02
    assert clamped > 1.5 * float(G @ G)  # the bias is real: the clamp more than doubles μ² here


def test_simulated_runs_without_noise_are_the_prediction():
    """No spread (tr C² = GᵀCG = 0): every replica is the deterministic prediction; with spread, deterministic for
    its seed and spread out."""
    parts = [(1.0, 0.1 * x, 0.0, 0.0) for x in np.linspace(1, 0.01, 20)]
    counts, thirds = predict.simulated_runs(parts, 16, 2000.0, replicas=4)
    assert np.all(counts == iterations_following([(a, b) for a, b, _, _ in parts], 16, 2000.0))
    unknown = [(a, b, math.nan, math.nan) for a, b, _, _ in parts]  # a profile of σ², μ² alone (advise's probe)
    assert np.all(predict.simulated_runs(unknown, 16, 2000.0, replicas=4)[0] == counts)
    noisy = [(a, b, 0.05, 0.01 * b) for a, b, _, _ in parts]
    one, _ = predict.simulated_runs(noisy, 16, 2000.0, replicas=16, seed=1)
    assert np.array_equal(one, predict.simulated_runs(noisy, 16, 2000.0, replicas=16, seed=1)[0])
    assert one.std() > 0 and np.isfinite(thirds).all()

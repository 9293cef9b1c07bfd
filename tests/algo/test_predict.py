"""bench.algo.predict against the engine's own estimator stepped iteration by iteration: the closed form per
window must give the same iterations as folding each iteration's moments into UnbiasedGain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.algo import predict
from bench.algo.gain import UnbiasedGain
from bench.algo.predict import iterations_following, iterations_following_each


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

"""The noise scale of micro-batches drawn without replacement (bench.core.algo.gain.population_moments), checked
against logreg's exact answer: at fixed weights the per-example gradients (σ(x·w) − y)·x give the full-data
gradient G and the per-example covariance trace s² exactly, and a Monte Carlo of the engine's own draws
(bench.core.engine.data.ItemStream: consecutive micro-batches of one epoch's permutation) must average to them
after the correction — and not before."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from bench.core.algo.gain import moments, pair_fraction, population_moments
from bench.core.engine.data import ItemStream
from tasks.logreg import dataset


@functools.cache
def optimum() -> np.ndarray:
    """logreg's minimiser (Newton's method; the loss is convex)."""
    x, y = dataset()
    w = np.zeros(x.shape[1])
    for _ in range(30):
        p = 1 / (1 + np.exp(-(x @ w)))
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y)
        w -= np.linalg.solve(hess, x.T @ (p - y) / len(y))
    return w


def per_example(w: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(per-example gradients of the first n examples, their mean G, their covariance trace s²)."""
    x, y = dataset()
    x, y = x[:n], y[:n]
    grads = (1 / (1 + np.exp(-(x @ w))) - y)[:, None] * x
    mean = grads.mean(0)
    return grads, mean, float(((grads - mean) ** 2).sum() / (n - 1))


def engine_draws(grads: np.ndarray, b: int, S: int, iterations: int) -> np.ndarray:
    """(var, sqr, ρ) of each of `iterations` consecutive iterations of S micro-batches of b, drawn as the
    engine draws them (ItemStream's per-epoch permutations, cut into consecutive blocks)."""
    n = len(grads)
    stream = ItemStream(n, b, seed=0)
    out = []
    for t in range(iterations):
        first = t * S
        epochs, offsets = np.divmod(np.arange(first * b, (first + S) * b), n)
        items = np.empty(len(epochs), dtype=np.int64)
        for e in np.unique(epochs):
            here = epochs == e
            items[here] = stream.permutation(int(e))[offsets[here]]
        g = grads[items].reshape(S, b, -1).mean(1)
        var, sqr = moments(float((g**2).sum()), float((g.mean(0) ** 2).sum()), S)
        out.append((var, sqr, pair_fraction(first, S, n / b)))
    return np.array(out)


def z(values: np.ndarray, truth: float) -> float:
    """How many standard errors the mean of `values` lies from `truth`."""
    return (values.mean() - truth) / (values.std(ddof=1) / np.sqrt(len(values)))


def test_pair_fraction():
    assert pair_fraction(0, 8, 625) == 1.0  # inside one epoch
    assert pair_fraction(621, 8, 625) == pytest.approx((4 * 3 + 4 * 3) / 56)  # 4 + 4 across a boundary
    assert pair_fraction(0, 8, float("inf")) == 1.0 and pair_fraction(3, 1, 625) == 1.0
    assert population_moments(2.0, 3.0, float("inf")) == (2.0, 3.0)  # independent draws: nothing to correct


def test_corrected_moments_are_unbiased_and_raw_sqr_is_not():
    """logreg (N = 20 000, b = 32, S = 64) at weights where |G|² ≈ s²/N, as late in the smoke's S = 8 run: the raw
    μ² estimate is low by s²/N (most of |G|²), the corrected one is not; σ² is unbiased either way."""
    grads, G, s2 = per_example(0.8 * optimum(), 20_000)
    b, S, M = 32, 64, 20_000 / 32
    d = engine_draws(grads, b, S, 3000)
    sigma2, mu2 = population_moments(d[:, 0], d[:, 1], M, d[:, 2])
    g2 = float(G @ G)
    assert abs(z(d[:, 0], s2 / b)) < 4 and abs(z(sigma2, s2 / b)) < 4
    assert abs(z(mu2, g2)) < 4
    assert z(d[:, 1], g2) < -8  # before the correction: biased low, by ≈ ρ·s²/N
    assert d[:, 1].mean() == pytest.approx(g2 - s2 / 20_000, rel=0.25, abs=3 * d[:, 1].std() / np.sqrt(len(d)))
    exact_B = s2 / g2
    assert b * sigma2.mean() / mu2.mean() == pytest.approx(exact_B, rel=0.2)
    assert b * d[:, 0].mean() / d[:, 1].mean() > 3 * exact_B  # the uncorrected noise scale: several times too large


def test_iterations_across_an_epoch_boundary_use_their_pair_share():
    """2 000 examples, b = 20, S = 30: most iterations straddle an epoch boundary, where micro-batches of
    two permutations are independent; correcting as if every pair shared one permutation (ρ = 1) over-corrects."""
    grads, G, s2 = per_example(0.6 * optimum(), 2000)
    b, S, M = 20, 30, 2000 / 20
    d = engine_draws(grads, b, S, 8000)
    assert 0.5 < d[:, 2].mean() < 0.99
    _, mu2 = population_moments(d[:, 0], d[:, 1], M, d[:, 2])
    _, mu2_all = population_moments(d[:, 0], d[:, 1], M, 1.0)
    g2 = float(G @ G)
    assert abs(z(mu2, g2)) < 4
    assert z(mu2_all, g2) > 6

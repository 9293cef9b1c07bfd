"""Finding (iii)'s reference (bench.run.independent) held to logreg's exact oracle: the offline estimate through
torch.func (the path for tasks without an oracle, which shares no code with the engine's statistics) against the
exact σ², μ², tr C², GᵀCG at the same weights; the oracle's tr Σ² and GᵀΣG against Σ built per example; the
oracle over the items an iteration draws from against the engine's own statistics of that iteration."""

from __future__ import annotations

import math

import numpy as np
import torch

from bench.core.algo.gain import moments
from bench.core.engine.data import ItemStream
from bench.run import independent
from bench.run.offline_gain import microbatches
from tasks import get_task
from tasks.logreg import dataset, exact_moments
from tests.helpers import spec_for

W = np.linspace(-0.4, 0.4, 30)  # weights part-way to the optimum (μ² well above its noise at b = 32)


def test_the_oracle_gives_the_covariance_s_square_and_quadratic_form():
    x, y = dataset()
    r = 1 / (1 + np.exp(-(x @ W))) - y
    g = x * r[:, None]
    cov = np.cov(g.T, bias=True)  # Σ over the N examples as the population
    m = exact_moments(W)
    G = g.mean(axis=0)
    assert math.isclose(m.trace, np.trace(cov), rel_tol=1e-9) and math.isclose(m.sqr, G @ G, rel_tol=1e-9)
    assert math.isclose(m.trace_sq, np.sum(cov * cov), rel_tol=1e-9)
    assert math.isclose(m.spread, G @ cov @ G, rel_tol=1e-9)
    items = np.arange(100, 5000)
    sub = exact_moments(W, items=items)
    assert math.isclose(sub.trace, np.trace(np.cov(g[items].T, bias=True)), rel_tol=1e-9)


def test_the_offline_reference_through_torch_func_estimates_the_exact_moments():
    task = get_task("logreg")
    spec = spec_for("logreg", batch_size=32, preset="tiny")
    model = task.build_model(spec)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(W, dtype=torch.float32)[None])
    train = task.train_set(spec, None)
    ref = independent.measure(task, model, microbatches(task, train, spec, 256, seed=5), torch.device("cpu"))
    exact = independent.from_oracle(*[getattr(exact_moments(W), k) for k in ("sqr", "trace", "trace_sq", "spread")], 32)
    assert ref.source == independent.OFFLINE and exact.source == independent.EXACT
    assert abs(ref.var - exact.var) < 4 * ref.var_se and abs(ref.sqr - exact.sqr) < 4 * ref.sqr_se
    assert 0 < ref.var_se < 0.3 * ref.var and 0 < ref.sqr_se < ref.sqr
    assert abs(ref.trace_sq / exact.trace_sq - 1) < 0.5 and abs(ref.spread / exact.spread - 1) < 0.8


def test_the_drawn_reference_is_what_the_engine_reads_there():
    """Over the items left in the epoch's permutation at iteration k (fixed S): E[var̂] = tr Σ_R/b and
    E[sqr̂] = ‖G_R‖² − tr Σ_R/|R|; the mean of the engine's own `moments` over many permutations' draws of S
    micro-batches from R agrees (an unbiased engine reads the drawn reference, not the whole set's)."""
    x, y = dataset()
    r = 1 / (1 + np.exp(-(x @ W))) - y
    g = x * r[:, None]
    scale, b, k = 8, 32, 37
    left = ItemStream(len(y), b, 0).permutation(0)[k * scale * b :]
    m = exact_moments(W, items=left)
    ref = independent.from_drawn(m.sqr, m.trace, m.trace_sq, m.spread, len(left), b)
    rng = np.random.default_rng(0)
    est = []
    for _ in range(1000):
        pick = rng.permutation(left)[: scale * b].reshape(scale, b)
        gi = g[pick].mean(axis=1)
        est.append(moments(float((gi**2).sum()), float((gi.mean(axis=0) ** 2).sum()), scale))
    var, sqr = np.mean(est, axis=0)
    se = np.std(est, axis=0) / math.sqrt(len(est))
    assert abs(var - ref["ref_var"]) < 4 * se[0] and abs(sqr - ref["ref_sqr"]) < 4 * se[1]
    assert ref["ref_drawn"] == 1 and ref["ref_sqr"] < m.sqr

"""The reference finding (iii) judges AdaScale runs against (issue 53.1): the gradient moments at a run's kept
weights, measured by a path that shares nothing with the engine's online statistics, so that a bias in those
statistics (its hooks, its sums, bench.algo.gain.moments) cannot bias the reference too.

- Where the task has an exact oracle (`Task.exact_moments`: logreg), the reference is exact: σ² = tr Σ/b,
  μ² = ‖G‖², and for the spread of the engine's per-iteration estimates tr C² = tr Σ²/b², GᵀCG = GᵀΣG/b
  (C = Σ/b, one micro-batch's covariance); no sampling error.
- Elsewhere, n micro-batches drawn with replacement (bench.run.offline_gain.Draws, its own stream), each one's
  gradient taken by torch.func.grad of the task's loss through torch.func.functional_call on a fresh copy of
  the buffers (not the engine's accumulate, hooks or vmap), stacked as rows g_i in float64. Then, centred:
      D_i = g_i − ḡ,  σ² = Σ‖D_i‖²/(n − 1),  μ² = ‖ḡ‖² − σ²/n      (both unbiased for i.i.d. draws)
      tr C² ≈ mean over i ≠ j of (D_i·D_j)²,   GᵀCG ≈ mean_i (D_i·ḡ)² − tr C²/n  (at least 0)
  with delete-one jackknife standard errors of σ² and μ² from the centred Gram matrix.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad

from bench.engine.data import to_device

COLUMNS = ("ref_var", "ref_sqr", "ref_var_se", "ref_sqr_se", "ref_trace_sq", "ref_spread", "ref_drawn")  # all numbers
EXACT, OFFLINE = "exact", "offline"  # ref_source: the task's oracle, or the independent offline estimate


@dataclass(frozen=True)
class Reference:
    """One kept point's moments of a micro-batch gradient, as the COLUMNS of offline_gain.csv."""

    var: float
    sqr: float
    var_se: float
    sqr_se: float
    trace_sq: float
    spread: float
    source: str
    drawn: int = 0  # 1: the moments the engine's draws at that iteration expect (no correction left to make)

    def row(self) -> dict[str, Any]:
        """The CSV's columns; the source is not written: the oracle's errors are 0, the estimate's are not."""
        values = (self.var, self.sqr, self.var_se, self.sqr_se, self.trace_sq, self.spread, self.drawn)
        return dict(zip(COLUMNS, values, strict=True))


def from_oracle(sqr: float, trace: float, trace_sq: float, spread: float, batch_size: float) -> Reference:
    """The exact reference from a task's oracle (tasks.base.ExactMoments) at batch size b."""
    b = float(batch_size)
    return Reference(trace / b, sqr, 0.0, 0.0, trace_sq / b**2, spread / b, EXACT)


def from_drawn(
    sqr: float, trace: float, trace_sq: float, spread: float, left: int, batch_size: float
) -> dict[str, Any]:
    """The exact reference over the `left` items an iteration draws its micro-batches from without replacement
    (the oracle over those items as the population): E[var̂] = tr Σ_R/b and E[sqr̂] = ‖G_R‖² − tr Σ_R/left
    (bench.algo.gain's derivation, with R the population), as the engine's statistics expect them."""
    b = float(batch_size)
    return Reference(trace / b, sqr - trace / left, 0.0, 0.0, trace_sq / b**2, spread / b, EXACT, 1).row()


def gradients(task: Any, model: nn.Module, batches: Iterable[Any], device: torch.device) -> np.ndarray:
    """Each micro-batch's gradient of the task's loss at `model`'s weights (n × parameters, float64), by
    torch.func.grad through functional_call; buffers copied afresh per micro-batch (BatchNorm in train mode
    normalises the micro-batch alone and writes only into its copy)."""
    model = copy.deepcopy(model).train()
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def loss(p: dict[str, torch.Tensor], bufs: dict[str, torch.Tensor], batch: Any) -> torch.Tensor:
        def call(*args: Any, **kwargs: Any) -> Any:
            return functional_call(model, {**p, **bufs}, args, kwargs, strict=False)

        return task.loss(call, batch)

    g = grad(loss)
    rows = []
    for batch in batches:
        out = g(params, {n: b.clone() for n, b in buffers.items()}, to_device(batch, device))
        rows.append(torch.cat([out[n].reshape(-1) for n in params]).to("cpu", torch.float64).numpy())
    return np.stack(rows)


def estimate(g: np.ndarray) -> Reference:
    """The offline reference from n ≥ 3 micro-batch gradients g (rows): the module docstring's estimates."""
    n = len(g)
    if n < 3:
        raise ValueError(f"{n} micro-batch gradients: the reference needs at least 3")
    mean = g.mean(axis=0)
    d = g - mean
    k = d @ d.T  # centred Gram matrix
    var = float(np.trace(k)) / (n - 1)
    sqr = float(mean @ mean) - var / n
    off = k[~np.eye(n, dtype=bool)]
    trace_sq = float(np.mean(off**2))
    spread = max(float(np.mean((d @ mean) ** 2)) - trace_sq / n, 0.0)
    var_loo, sqr_loo = _leave_one_out(g, k, d @ mean)
    return Reference(var, sqr, _jack_se(var_loo), _jack_se(sqr_loo), trace_sq, spread, OFFLINE)


def _leave_one_out(g: np.ndarray, k: np.ndarray, dm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """σ² and μ² with micro-batch i left out, for every i, from the centred Gram matrix k and D_i·ḡ: without i
    the mean moves by −D_i/(n − 1), so ‖ḡ₋ᵢ‖² = ‖ḡ‖² − 2 D_i·ḡ/(n − 1) + ‖D_i‖²/(n − 1)², and the centred
    sum of squares loses ‖D_i‖²·n/(n − 1)."""
    n = len(g)
    mean_sq = float(np.mean(g, axis=0) @ np.mean(g, axis=0))
    dd = np.diag(k)
    ss = float(np.trace(k)) - dd * n / (n - 1)
    var = ss / (n - 2)
    msq = mean_sq - 2 * dm / (n - 1) + dd / (n - 1) ** 2
    return var, msq - var / (n - 1)


def _jack_se(values: np.ndarray) -> float:
    n = len(values)
    return math.sqrt((n - 1) / n * float(np.sum((values - values.mean()) ** 2)))

"""The reference finding (iii) judges AdaScale runs against (issue 53.1): the gradient moments at a run's kept
weights, measured by a path that shares nothing with the engine's online statistics, so that a bias in those
statistics (its hooks, its sums, bench.core.algo.gain.moments) cannot bias the reference too.

- Where the task has an exact oracle (`Task.exact_moments`: logreg), the reference is exact: σ² = tr Σ/b,
  μ² = ‖G‖², and for the spread of the engine's per-iteration estimates tr C² = tr Σ²/b², GᵀCG = GᵀΣG/b
  (C = Σ/b, one micro-batch's covariance); no sampling error.
- Elsewhere, n micro-batches drawn with replacement (bench.run.offline_gain.Draws, its own stream), each one's
  gradient taken by torch.func.grad of the task's loss through torch.func.functional_call on a fresh copy of
  the buffers (not the engine's accumulate, hooks or vmap), folded into GROUPS gradient sums in float64 (the
  memory `gain` already takes) with each ‖g_i‖² kept; σ², μ², tr C², GᵀCG and their jackknife from those
  (`estimate`).
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

from bench.core.engine.data import to_device

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
    (bench.core.algo.gain's derivation, with R the population), as the engine's statistics expect them."""
    b = float(batch_size)
    return Reference(trace / b, sqr - trace / left, 0.0, 0.0, trace_sq / b**2, spread / b, EXACT, 1).row()


GROUPS = 32  # round-robin groups of micro-batches: the memory (GROUPS gradient sums, as `gain`'s) and the jackknife


def measure(task: Any, model: nn.Module, batches: Iterable[Any], device: torch.device) -> Reference:
    """The offline reference at `model`'s weights from the micro-batches `batches` (drawn with replacement): each
    one's gradient of the task's loss by torch.func.grad through functional_call (buffers copied afresh per
    micro-batch: BatchNorm in train mode normalises the micro-batch alone and writes only into its copy), folded
    into GROUPS round-robin gradient sums and its squared norm kept (`estimate`)."""
    model = copy.deepcopy(model).train()
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def loss(p: dict[str, torch.Tensor], bufs: dict[str, torch.Tensor], batch: Any) -> torch.Tensor:
        def call(*args: Any, **kwargs: Any) -> Any:
            return functional_call(model, {**p, **bufs}, args, kwargs, strict=False)

        return task.loss(call, batch)

    g = grad(loss)
    width = sum(p.numel() for p in params.values())
    sums = torch.zeros(GROUPS, width, dtype=torch.float64, device=device)
    counts, squares = np.zeros(GROUPS), []
    for i, batch in enumerate(batches):
        out = g(params, {n: b.clone() for n, b in buffers.items()}, to_device(batch, device))
        flat = torch.cat([out[n].reshape(-1) for n in params]).to(torch.float64)
        sums[i % GROUPS] += flat
        counts[i % GROUPS] += 1
        squares.append(float(flat @ flat))
    used = counts > 0
    return estimate(sums[torch.as_tensor(used)].cpu().numpy(), counts[used], np.asarray(squares))


def estimate(sums: np.ndarray, counts: np.ndarray, squares: np.ndarray) -> Reference:
    """The offline reference from K ≥ 3 groups' gradient sums (rows of `sums`, `counts` micro-batches each) and
    every micro-batch's ‖g_i‖² (`squares`, n of them): ḡ = Σ sums/n,
        σ² = (Σ‖g_i‖² − n‖ḡ‖²)/(n − 1),  μ² = ‖ḡ‖² − σ²/n                (unbiased for i.i.d. draws)
    and from the groups' means' deviations D_k = ḡ_k − ḡ (covariance C/m_k, m_k micro-batches in group k)
        tr C² ≈ mean over k ≠ l of m_k m_l (D_k·D_l)²,   GᵀCG ≈ mean_k m_k (D_k·ḡ)² − tr C²/n  (at least 0),
    with delete-one-group jackknife standard errors of σ² and μ²."""
    k, n = len(sums), float(np.sum(counts))
    if k < 3 or n < 4:
        raise ValueError(f"{int(n)} micro-batches in {k} groups: the reference needs at least 3 groups")
    total, q = sums.sum(axis=0), float(np.sum(squares))
    mean = total / n
    var = (q - n * float(mean @ mean)) / (n - 1)
    sqr = float(mean @ mean) - var / n
    d = sums / counts[:, None] - mean
    h = d @ d.T
    w = np.outer(counts, counts)
    off = ~np.eye(k, dtype=bool)
    trace_sq = float(np.mean((w * h * h)[off]))
    spread = max(float(np.mean(counts * (d @ mean) ** 2)) - trace_sq / n, 0.0)
    var_loo, sqr_loo = _leave_one_out(sums, counts, squares, total, q)
    return Reference(var, sqr, _jack_se(var_loo), _jack_se(sqr_loo), trace_sq, spread, OFFLINE)


def _leave_one_out(
    sums: np.ndarray, counts: np.ndarray, squares: np.ndarray, total: np.ndarray, q: float
) -> tuple[np.ndarray, np.ndarray]:
    """σ² and μ² with group k left out, for every k (micro-batch i is in group i mod K)."""
    k = len(sums)
    group_sq = np.array([float(np.sum(squares[j::GROUPS])) for j in range(k)]) if k == GROUPS else None
    if group_sq is None:  # fewer groups than GROUPS were filled: the first k, one micro-batch each
        group_sq = np.asarray(squares[:k], dtype=float)
    m = float(np.sum(counts)) - counts
    left = total[None, :] - sums
    mean_sq = np.einsum("kp,kp->k", left, left) / m**2
    var = (q - group_sq - m * mean_sq) / (m - 1)
    return var, mean_sq - var / m


def _jack_se(values: np.ndarray) -> float:
    n = len(values)
    return math.sqrt((n - 1) / n * float(np.sum((values - values.mean()) ** 2)))

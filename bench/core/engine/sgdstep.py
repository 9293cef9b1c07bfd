"""The SGD step of every iteration: torch.optim.SGD's own arithmetic, without Optimizer.step's wrapper.

`optimizer.step()` runs torch.optim's functional `sgd` (torch.optim.sgd.sgd) inside a per-call wrapper: a
profiler range, the global and per-optimizer step hooks, a grad-mode switch, the collection of each group's
gradients and momentum buffers; `zero_grad` opens a profiler range of its own. On a model whose iteration
takes a third of a millisecond on a CPU (tiny logreg at S = 4) that wrapper is ~15 % of the iteration, more
than everything the engine adds (`adascale-bench perf`, whose bare loop keeps calling `optimizer.step()`).
`step` calls the same functional `sgd` with the group's own settings, so parameters and momentum buffers get
the same bits (tests/engine/test_sgdstep.py), and the optimizer stays the one a checkpoint saves and restores.
What it leaves out: step hooks (the engine registers none) and the profiler's "Optimizer.step" range.
"""

from __future__ import annotations

import torch
from torch.optim.sgd import sgd


@torch.no_grad()
def step(optimizer: torch.optim.SGD, lr: float) -> None:
    """One SGD step at `lr` on every parameter that has a gradient, then its gradient dropped (as
    `zero_grad(set_to_none=True)`); the momentum buffers stay in `optimizer.state`, where SGD keeps them."""
    state = optimizer.state
    for group in optimizer.param_groups:
        group["lr"] = lr  # what the optimizer's state_dict, and so a checkpoint, records
        params = [p for p in group["params"] if p.grad is not None]
        grads = [p.grad for p in params]
        momentum = group["momentum"]
        buffers = [state[p].get("momentum_buffer") for p in params] if momentum != 0 else []
        fresh = any(b is None for b in buffers)  # (the first step) sgd makes these buffers, in `buffers`
        sgd(
            params,
            grads,
            buffers,
            has_sparse_grad=any(g.is_sparse for g in grads),
            foreach=group["foreach"],
            fused=group["fused"],
            weight_decay=group["weight_decay"],
            momentum=momentum,
            lr=lr,
            dampening=group["dampening"],
            nesterov=group["nesterov"],
            maximize=group["maximize"],
        )
        if fresh:
            for p, buffer in zip(params, buffers, strict=True):
                state[p]["momentum_buffer"] = buffer
        for p in params:
            p.grad = None

"""The AdamW step (spec `optimizer: adamw`): torch.optim's functional AdamW (torch.optim.adamw.adamw), without
Optimizer.step's wrapper, as bench.core.engine.sgdstep does for SGD.

It runs on the gradient the engine leaves in `.grad`, ḡ = (1/S) Σ g_i reduced with the same bits for every split
S = W × A (bench.core.engine.reduction), so every W × A split takes the same AdamW step. The state (exp_avg,
exp_avg_sq and step, one set per parameter) lives in `optimizer.state` under AdamW's own keys, where
torch.optim.AdamW keeps it: the optimizer's state_dict, and so the checkpoint, carries it, and a resumed run
continues with the same bits (tests/engine/test_adamw.py).

A rule may change β₁, β₂ and ε per iteration (`sqrt-sde`, a user's rule: bench.core.algo.rules.adam_hyper); they are
passed to the functional call, which reads them for this step alone (the bias corrections 1 − β^t use the β of
this step and the step count so far), and recorded in the group, as the lr is. Weight decay is AdamW's
decoupled one: p ← p·(1 − η·λ) before the Adam update, with the step's η.
"""

from __future__ import annotations

import torch
from torch.optim.adamw import adamw


@torch.no_grad()
def step(optimizer: torch.optim.AdamW, lr: float, betas: tuple[float, float], eps: float) -> None:
    """One AdamW step at `lr` with (β₁, β₂) = `betas` and `eps` on every parameter that has a gradient, then its
    gradient dropped (as `zero_grad(set_to_none=True)`)."""
    state = optimizer.state
    for group in optimizer.param_groups:
        group["lr"], group["betas"], group["eps"] = lr, tuple(betas), eps  # what the state_dict records
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if not state[p]:  # AdamW's own initial state (torch.optim.Adam._init_group, not capturable/fused)
                state[p]["step"] = torch.tensor(0.0, dtype=torch.float32)
                state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        grads = [p.grad for p in params]
        adamw(
            params,
            grads,
            [state[p]["exp_avg"] for p in params],
            [state[p]["exp_avg_sq"] for p in params],
            [],
            [state[p]["step"] for p in params],
            foreach=group["foreach"],
            capturable=False,
            differentiable=False,
            fused=group["fused"],
            has_complex=any(torch.is_complex(p) for p in params),
            amsgrad=False,
            beta1=betas[0],
            beta2=betas[1],
            lr=lr,
            weight_decay=group["weight_decay"],
            eps=eps,
            maximize=group["maximize"],
        )
        for p in params:
            p.grad = None

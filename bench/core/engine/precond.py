"""The preconditioned gradient statistics AdamScale's gain is computed from (method `adamscale`, AdamW only).

AdaptDL's AdamScale (adaptdl 0.2.11, `AdamGradientNoiseScale`) does not measure the gain on the raw gradient but
on the gradient Adam steps along: every micro-batch gradient g_i and the mean ḡ divided elementwise by Adam's
denominator P = √(v / (1 − β₂^t)) + ε, with v (exp_avg_sq) and t (the step count) as they stand before this
iteration's step, and P = 1 for the first 5 steps (t < 5), while v is still mostly its zero start. So
sum_sq = Σ_i ||g_i / P||² and mean_sq = ||ḡ / P||², and σ², μ² (bench.core.algo.gain.moments) are the variance and
squared mean of the preconditioned gradient: the noise the step actually sees. The arithmetic is AdaptDL's
(g / P in the gradient's dtype, squared and summed in float64); the sums over micro-batches, parameters and ranks
are `math.fsum` of the same per-(micro-batch, parameter) values for every split S = W × A, so every split gets the
same two numbers, and with them the same gain and the same steps.

Its cost (one division and one reduction per parameter and micro-batch, in a hook) is paid by `adamscale` runs
only: no other method installs it.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from bench.core.engine.distributed import Dist

PLAIN_STEPS = 5  # AdaptDL's: P = 1 while the step count is below this


class PreconditionedNorms:
    """Observes ||g_i / P||² of every parameter's micro-batch gradient through parameter hooks. Call `begin()`
    before an iteration's backward passes and `take(dist)` after ḡ is in `.grad` (before the step)."""

    def __init__(self, params: list[nn.Parameter], optimizer: torch.optim.Optimizer, beta2: float, eps: float) -> None:
        self.params, self.optimizer, self.beta2, self.eps = params, optimizer, beta2, eps
        self._p: list[torch.Tensor | None] = [None] * len(params)
        self._sq: list[torch.Tensor] = []
        self._on = True
        self._handles = [p.register_hook(partial(self._hook, i)) for i, p in enumerate(params)]

    def begin(self, on: bool = True) -> None:
        """P of every parameter from the optimizer's state before this iteration's step; `on` False: this iteration
        takes no statistics (S = 1, where AdamScale's gain is 1 by definition), and the hooks do nothing."""
        self._on, self._sq = on, []
        if not on:
            return
        state = self.optimizer.state
        for i, p in enumerate(self.params):
            s = state.get(p)
            t = float(s["step"]) if s else 0.0
            if t < PLAIN_STEPS:
                self._p[i] = None
                continue
            correction = 1.0 - self.beta2**t
            self._p[i] = (s["exp_avg_sq"].sqrt() / math.sqrt(correction)).add_(self.eps)
        self._sq = []

    def _hook(self, i: int, grad: torch.Tensor) -> None:
        if self._on:
            self._sq.append(self._squared(grad, i))

    def _squared(self, grad: torch.Tensor, i: int) -> torch.Tensor:
        p = self._p[i]
        scaled = grad.detach() if p is None else grad.detach() / p
        return scaled.pow(2).sum(dtype=torch.float64)

    def take(self, dist: Dist) -> tuple[float, float]:
        """(Σ_i ||g_i / P||², ||ḡ / P||²) over every micro-batch of every rank, the same floats on every rank."""
        mine = torch.stack(self._sq).tolist() if self._sq else []
        self._sq = []
        gathered = dist.gather_objects(mine)
        sum_sq = dist.broadcast(math.fsum(v for rank in gathered for v in rank) if gathered is not None else None)
        mean = [self._squared(p.grad, i) for i, p in enumerate(self.params) if p.grad is not None]
        mean_sq = math.fsum(torch.stack(mean).tolist()) if mean else 0.0
        return sum_sq, mean_sq

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

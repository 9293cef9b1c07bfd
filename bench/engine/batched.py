"""Simulated scale at the speed of one big batch (spec `microbatch_mode: batched`).

At scale S on one device the sequential path (bench.engine.loop.accumulate) runs A = S forward and
backward passes of b examples. Here the A micro-batches of the rank are stacked into one tensor of A × b
examples and one vectorised pass computes every micro-batch's own gradient g_i:

    torch.func.vmap(torch.func.grad(loss of one micro-batch))   over the micro-batch axis,

with the model called through torch.func.functional_call. Inside vmap each micro-batch is a batch of its
own, so BatchNorm normalises it with its own statistics (ghost batch norm, as the sequential path and the
paper do), and each micro-batch updates its own copy of the running statistics, starting from the
iteration's; the copies are merged afterwards into exactly what A sequential updates give (the formula
of bench.engine.batchnorm, with the micro-batches as the "ranks"):

    momentum m, q = 1 − m, u_i updates by micro-batch i, U = Σ u_i:
        r = q^U r_0 + Σ_i q^(Σ_(j>i) u_j) (r_i − q^(u_i) r_0)
    momentum None (a cumulative average over n_0 earlier updates):
        r = r_0 + Σ_i (n_0 + u_i) / (n_0 + U) (r_i − r_0)

Then ḡ is the pairwise (balanced binary tree) sum of the g_i in index order divided by A, as
bench.engine.reduction.TreeSum adds them, sum_sq = Σ_i ||g_i||² and mean_sq = ||ḡ||² from per-tensor
float32 norms squared in float64 and summed with math.fsum, as accumulate does. The arithmetic of the
vectorised kernels is not that of A separate passes, so results equal the sequential path's to float
rounding (the test asserts rtol 1e-5), not bit for bit.

What it does not handle falls back to the sequential path with a one-line notice, for the whole run:
- W > 1 (data parallelism: DDP reduces `.grad` inside backward, which this path never runs);
- micro-batches that are not nests of tensors of one shape each (length-bucketed speech batches,
  max-tokens transformer batches, detection targets of varying counts);
- models that draw random numbers in training (dropout): the sequential path seeds each micro-batch's
  draws (bench.engine.loop.dropout_seeds), which vmap cannot reproduce (`randomness="error"` detects it);
- anything else torch.func refuses (e.g. cuDNN RNNs): the error is named in the notice.
Memory: the A gradients are held at once (A × the model's parameters), plus A × b activations.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn.modules.batchnorm import _BatchNorm

from bench.engine import tree
from bench.errors import UserError

MODES = ("sequential", "batched")


def notice(message: str) -> None:
    print(f"adascale-bench: microbatch_mode=batched: {message}; using the sequential path", file=sys.stderr)


def stack_microbatches(micro: list[Any]) -> Any | None:
    """The micro-batches stacked along a new leading axis (a nest of tensors of the same structure), or
    None when they cannot be (other types, or tensors whose shapes differ)."""
    first = micro[0]
    if isinstance(first, torch.Tensor):
        if not all(isinstance(m, torch.Tensor) and m.shape == first.shape and m.dtype == first.dtype for m in micro):
            return None
        return torch.stack(micro)
    if isinstance(first, list | tuple):
        if not all(isinstance(m, list | tuple) and len(m) == len(first) for m in micro):
            return None
        parts = [stack_microbatches([m[i] for m in micro]) for i in range(len(first))]
        return None if any(p is None for p in parts) else type(first)(parts)
    if isinstance(first, dict):
        if not all(isinstance(m, dict) and m.keys() == first.keys() for m in micro):
            return None
        parts = {k: stack_microbatches([m[k] for m in micro]) for k in first}
        return None if any(p is None for p in parts.values()) else parts
    return None


def pairwise_sum(stacked: torch.Tensor) -> torch.Tensor:
    """Σ_i stacked[i] added as TreeSum adds the micro-batch gradients: a binary counter over the index
    order, equal subtrees merged (older + newer), what is left folded smaller subtrees first."""
    stack: tree.Stack = []
    for i in range(stacked.shape[0]):
        tree.push(stack, stacked[i], torch.add)
    return tree.fold(stack, torch.add)


def merge_running_stats(
    start: torch.Tensor, copies: torch.Tensor, updates: list[int], n0: int, momentum: float | None
) -> torch.Tensor:
    """The running statistic after the micro-batches' updates in order, from each micro-batch's own copy
    (`copies[i]`: `start` updated by micro-batch i alone, `updates[i]` times), in float64."""
    r0, total = start.double(), sum(updates)
    out = r0.clone() if momentum is None else (1.0 - momentum) ** total * r0
    for i, u in enumerate(updates):
        if u == 0:
            continue
        if momentum is None:
            out += (n0 + u) / (n0 + total) * (copies[i].double() - r0)
        else:
            q = 1.0 - momentum
            out += q ** sum(updates[i + 1 :]) * (copies[i].double() - q**u * r0)
    return out


class BatchedMicrobatches:
    """One vectorised forward/backward over a rank's A micro-batches (see the module's docstring)."""

    def __init__(self, module: nn.Module, task: Any, warn: Callable[[str], None] = notice) -> None:
        self.module, self.task, self.warn = module, task, warn
        self.names = [n for n, p in module.named_parameters() if p.requires_grad]
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.bn = {
            name: m
            for name, m in module.named_modules()
            if isinstance(m, _BatchNorm) and m.track_running_stats and m.running_mean is not None
        }
        stats = ("running_mean", "running_var", "num_batches_tracked")
        self.bn_keys = {f"{name}.{b}" for name in self.bn for b in stats}
        self.disabled: str | None = None
        self._step = vmap(
            grad(self._loss, has_aux=True), in_dims=(None, None, 0, 0), randomness="error"
        )  # over (params, fixed buffers, per-micro-batch BatchNorm buffers, micro-batches)

    @classmethod
    def for_spec(cls, spec: dict[str, Any], module: nn.Module, task: Any, world: int) -> BatchedMicrobatches | None:
        mode = spec.get("microbatch_mode", "sequential")
        if mode not in MODES:
            raise UserError(f"microbatch_mode {mode!r}: expected one of {', '.join(MODES)}")
        if mode == "sequential":
            return None
        if world > 1:
            notice(f"W = {world} ranks (data parallelism needs DDP's backward)")
            return None
        return cls(module, task)

    def _loss(
        self, params: dict[str, torch.Tensor], fixed: dict[str, torch.Tensor], bn: dict[str, torch.Tensor], batch: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        state = {**params, **fixed, **bn}

        def model(*args: Any, **kwargs: Any) -> Any:
            return functional_call(self.module, state, args, kwargs, strict=False)

        loss = self.task.loss(model, batch)
        return loss, loss.detach()

    def accumulate(self, micro: list[Any], scale: int, track: bool = True) -> tuple[float, float, float] | None:
        """Leave ḡ in `.grad`, update the BatchNorm running statistics, and return (mean loss, sum_sq,
        mean_sq) as bench.engine.loop.accumulate does; or None, having touched nothing, when this path
        cannot run these micro-batches (a notice says why, once; the run goes on sequentially)."""
        terms = self.terms(micro)
        if terms is None:
            return None
        losses, sum_sq_terms, mean_sq_terms = terms
        mean_sq = math.fsum(mean_sq_terms)
        sum_sq = math.fsum(sum_sq_terms) if track else (mean_sq if scale == 1 else math.nan)
        return math.fsum(losses) / scale, sum_sq, mean_sq

    def terms(self, micro: list[Any]) -> tuple[list[float], list[float], list[float]] | None:
        """(the A losses, ||g_i||² per (micro-batch, tensor), ||ḡ||² per tensor), ḡ left in `.grad`."""
        if self.disabled is not None:
            return None
        accum = len(micro)
        stacked = stack_microbatches(micro)
        if stacked is None:
            self._disable("its micro-batches are not tensors of one shape each")
            return None
        params = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        buffers = dict(self.module.named_buffers())
        fixed = {n: b for n, b in buffers.items() if n not in self.bn_keys}
        start = {n: b for n, b in buffers.items() if n in self.bn_keys}
        copies = {n: b.detach().unsqueeze(0).repeat(accum, *([1] * b.dim())) for n, b in start.items()}
        try:
            grads, losses = self._step(params, fixed, copies, stacked)
        except RuntimeError as e:  # randomness under vmap, an op without a batching rule, ...
            self._disable(f"torch.func cannot run this model ({' '.join(str(e).split())[:160]})")
            return None
        stacks = [grads[n] for n in self.names]
        norms = torch.stack([torch.linalg.vector_norm(g.reshape(accum, -1), dim=1) for g in stacks], dim=1)
        gbar = [pairwise_sum(g).div_(accum) for g in stacks]
        for p, g in zip(self.params, gbar, strict=True):
            p.grad = g
        mean_norms = torch._foreach_norm(gbar)
        with torch.no_grad():
            self._merge_bn(start, copies)
        host = torch.cat([losses.detach().float().reshape(-1), norms.reshape(-1), torch.stack(mean_norms)]).tolist()
        n_obs = norms.numel()
        return host[:accum], [v * v for v in host[accum : accum + n_obs]], [v * v for v in host[accum + n_obs :]]

    def _merge_bn(self, start: dict[str, torch.Tensor], copies: dict[str, torch.Tensor]) -> None:
        for name, m in self.bn.items():
            n0 = int(start[f"{name}.num_batches_tracked"])
            updates = (copies[f"{name}.num_batches_tracked"] - n0).tolist()
            momentum = None if m.momentum is None else float(m.momentum)
            for key in ("running_mean", "running_var"):
                buf = start[f"{name}.{key}"]
                buf.copy_(merge_running_stats(buf, copies[f"{name}.{key}"], updates, n0, momentum).to(buf.dtype))
            m.num_batches_tracked.fill_(n0 + sum(updates))

    def _disable(self, why: str) -> None:
        self.disabled = why
        self.warn(why)

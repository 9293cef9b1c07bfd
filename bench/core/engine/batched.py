"""Simulated scale at the speed of one big batch (spec `microbatch_mode: batched`).

At scale S on one device the sequential path (bench.core.engine.accumulate) runs A = S forward and
backward passes of b examples. Here the A micro-batches of the rank are stacked into one tensor of A × b
examples and one vectorised pass computes every micro-batch's own gradient g_i:

    torch.func.vmap(torch.func.grad(loss of one micro-batch))   over the micro-batch axis,

with the model called through torch.func.functional_call. Inside vmap each micro-batch is a batch of its
own, so BatchNorm normalises it with its own statistics (ghost batch norm, as the sequential path and the
paper do), and each micro-batch writes its own batch statistics into its own copy of the running buffers
(the layers run at momentum 1 during an iteration, bench.core.engine.batchnorm); the copies become the rows
that bench.core.engine.batchnorm.RunningStats replays in index order, as it does for the sequential path.

Then ḡ is the pairwise (balanced binary tree) sum of the g_i in index order divided by A, as
bench.core.engine.reduction.TreeSum adds them, sum_sq = Σ_i ||g_i||² and mean_sq = ||ḡ||² from per-tensor
float32 norms squared in float64 and summed with math.fsum, as accumulate does. The arithmetic of the
vectorised kernels is not that of A separate passes, so results equal the sequential path's to float
rounding (the test asserts rtol 1e-5), not bit for bit.

What it does not handle falls back to the sequential path with a one-line notice, for the whole run:
- W > 1 (data parallelism: DDP reduces `.grad` inside backward, which this path never runs);
- micro-batches that are not nests of tensors of one shape each (length-bucketed speech batches,
  max-tokens transformer batches, detection targets of varying counts);
- models that draw random numbers in training (dropout): the sequential path seeds each micro-batch's
  draws (bench.core.engine.accumulate.dropout_seeds), which vmap cannot reproduce (`randomness="error"` detects it);
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

from bench.core.engine import tree
from bench.core.engine.batchnorm import RunningStats

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
    def for_mode(cls, mode: str, module: nn.Module, task: Any, world: int) -> BatchedMicrobatches | None:
        """The batched path where the spec's `microbatch_mode` asks for it and W = 1; None: the sequential one."""
        if mode == "sequential":  # or batched: the schema's two values
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

    def accumulate(
        self, micro: list[Any], scale: int, track: bool = True, bn: RunningStats | None = None
    ) -> tuple[float, float, float] | None:
        """Leave ḡ in `.grad`, hand each micro-batch's BatchNorm statistics to `bn` (begun for these A
        micro-batches; required when the model has BatchNorm layers), and return (mean loss, sum_sq,
        mean_sq) as bench.core.engine.accumulate does; or None, having touched nothing, when this path
        cannot run these micro-batches (a notice says why, once; the run goes on sequentially)."""
        terms = self.terms(micro, bn)
        if terms is None:
            return None
        losses, sum_sq_terms, mean_sq_terms = terms
        mean_sq = math.fsum(mean_sq_terms)
        sum_sq = math.fsum(sum_sq_terms) if track else (mean_sq if scale == 1 else math.nan)
        return math.fsum(losses) / scale, sum_sq, mean_sq

    def terms(
        self, micro: list[Any], bn: RunningStats | None = None
    ) -> tuple[list[float], list[float], list[float]] | None:
        """(the A losses, ||g_i||² per (micro-batch, tensor), ||ḡ||² per tensor), ḡ left in `.grad`."""
        if self.disabled is not None:
            return None
        if self.bn and bn is None:
            raise ValueError("a model with BatchNorm layers needs its RunningStats (begun for these micro-batches)")
        accum = len(micro)
        stacked = stack_microbatches(micro)
        if stacked is None:
            self._disable("its micro-batches are not tensors of one shape each")
            return None
        params = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        buffers = dict(self.module.named_buffers())
        fixed = {n: b for n, b in buffers.items() if n not in self.bn_keys}
        # each micro-batch's own copy of the BatchNorm buffers; at momentum 1 it receives the micro-batch's
        # batch statistics and use count (what it started from does not matter: zeros)
        copies = {n: b.new_zeros(accum, *b.shape) for n, b in buffers.items() if n in self.bn_keys}
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
        over = []
        if bn is not None:
            with torch.no_grad():
                for name in self.bn:
                    mean, var, count = (
                        copies[f"{name}.{k}"] for k in ("running_mean", "running_var", "num_batches_tracked")
                    )
                    bn.store(name, mean, var, count)
            over = [torch.stack(bn.usage())]
        parts = [losses.detach().float().reshape(-1), norms.reshape(-1), torch.stack(mean_norms), *over]
        host = torch.cat(parts).tolist()  # one transfer
        if bn is not None:
            bn.receive(None, (host[-2], host[-1]))
            del host[-2:]
        n_obs = norms.numel()
        return host[:accum], [v * v for v in host[accum : accum + n_obs]], [v * v for v in host[accum + n_obs :]]

    def _disable(self, why: str) -> None:
        self.disabled = why
        self.warn(why)

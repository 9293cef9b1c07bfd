"""BatchNorm running statistics that do not depend on how S is split over ranks.

At W = 1 one model sees the S micro-batches of an iteration one after another, and each BatchNorm
layer's running mean and variance take S momentum updates in that order. At W > 1 every rank updates
its own copy with its A micro-batches only (DDP's `broadcast_buffers` is off, so rank 0's buffers are
not copied over the others'). At the end of the iteration the ranks' updates are merged so that every
rank holds exactly what the sequential W = 1 update gives.

With momentum m and q = 1 − m, u_k updates on rank k (micro-batches in rank order, u_k = A when every
micro-batch passes the layer once) and U = Σ_k u_k:
    sequential:  r_S = q^U r_0 + Σ_i m q^(U−i) x_i
    rank k:      r_k = q^(u_k) r_0 + Σ_a m q^(u_k−a) x_(k,a)
    so           r_S = q^U r_0 + Σ_k q^(Σ_(j>k) u_j) (r_k − q^(u_k) r_0),
one all-reduce of weighted deltas. With momentum None (a cumulative average over n_0 earlier updates)
    r_S = r_0 + Σ_k (n_0 + u_k) / (n_0 + U) (r_k − r_0).
num_batches_tracked ends at n_0 + U on every rank.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from bench.engine.distributed import Dist


class RunningStatsMerge:
    """Snapshot the BatchNorm buffers before an iteration (`begin`), merge the ranks' updates after it
    (`end`). Every rank must call both, in the same iterations: `end` runs two collectives."""

    def __init__(self, layers: list[_BatchNorm], dist: Dist) -> None:
        self.layers = layers
        self.dist = dist
        self._start: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._n0 = torch.zeros(0, dtype=torch.long)

    @classmethod
    def for_model(cls, module: nn.Module, dist: Dist) -> RunningStatsMerge | None:
        """None when there is nothing to merge: one rank, or no layer that tracks running statistics."""
        layers = [
            m
            for m in module.modules()
            if isinstance(m, _BatchNorm) and m.track_running_stats and m.running_mean is not None
        ]
        return cls(layers, dist) if dist.world > 1 and layers else None

    def begin(self) -> None:
        self._start = [(m.running_mean.detach().clone(), m.running_var.detach().clone()) for m in self.layers]
        self._n0 = torch.stack([m.num_batches_tracked for m in self.layers]).clone()

    @torch.no_grad()
    def end(self) -> None:
        dist, world, rank, n_layers = self.dist, self.dist.world, self.dist.rank, len(self.layers)
        # 1. every rank's number of updates per layer (a layer may be skipped, or used twice), one all-reduce
        counts = torch.zeros(world, n_layers, dtype=torch.float64, device=self._n0.device)
        counts[rank] = (torch.stack([m.num_batches_tracked for m in self.layers]) - self._n0).double()
        flat = torch.cat([dist.all_reduce_sum(counts).flatten(), self._n0.double()]).round().long().tolist()
        updates, starts = flat[: world * n_layers], flat[world * n_layers :]  # one host sync
        # 2. this rank's weighted deltas, summed over ranks in one all-reduce
        deltas, bases = [], []
        for j, (m, (mean0, var0), n0) in enumerate(zip(self.layers, self._start, starts, strict=True)):
            u = [updates[k * n_layers + j] for k in range(world)]
            total, after = sum(u), sum(u[rank + 1 :])
            if m.momentum is None:  # cumulative average
                base, weight, keep = 1.0, (n0 + u[rank]) / (n0 + total) if n0 + total else 0.0, 1.0
            else:
                q = 1.0 - float(m.momentum)
                base, weight, keep = q**total, q**after, q ** u[rank]
            for now, start in ((m.running_mean, mean0), (m.running_var, var0)):
                deltas.append((weight * (now.double() - keep * start.double())).flatten())
            bases.append((base, n0 + total))
        merged = dist.all_reduce_sum(torch.cat(deltas))
        # 3. r_S = base · r_0 + Σ_k delta_k, written back in the buffers' own dtype
        at = 0
        for m, (mean0, var0), (base, tracked) in zip(self.layers, self._start, bases, strict=True):
            for buf, start in ((m.running_mean, mean0), (m.running_var, var0)):
                n = buf.numel()
                buf.copy_((base * start.double() + merged[at : at + n].view_as(buf)).to(buf.dtype))
                at += n
            m.num_batches_tracked.fill_(tracked)
        self._start = []

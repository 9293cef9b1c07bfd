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
        self._q: tuple[torch.Tensor, torch.Tensor] | None = None  # _momenta's, on the buffers' device

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

    def _momenta(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(cumulative-average flags, q = 1 − momentum) per layer on `device`, made once: building a tensor
        from host values on a GPU is a copy the host waits for."""
        if self._q is None or self._q[1].device != device:
            flags = torch.tensor([m.momentum is None for m in self.layers])
            q = torch.tensor([1.0 - float(m.momentum or 0.0) for m in self.layers], dtype=torch.float64)
            self._q = (flags.to(device), q.to(device))
        return self._q

    @torch.no_grad()
    def end(self) -> None:
        """Two all-reduces and no host sync: the update counts stay on the device, and the weights of the
        formulas above are computed there for every layer at once (q per layer is known on the host)."""
        dist, world, rank = self.dist, self.dist.world, self.dist.rank
        # 1. every rank's number of updates per layer (a layer may be skipped, or used twice), one all-reduce
        n0 = self._n0.double()
        counts = torch.zeros(world, len(self.layers), dtype=torch.float64, device=n0.device)
        counts[rank] = torch.stack([m.num_batches_tracked for m in self.layers]).double() - n0
        counts = dist.all_reduce_sum(counts)
        mine, total, after = counts[rank], counts.sum(0), counts[rank + 1 :].sum(0)
        # 2. per layer: base (of r_0), weight (of this rank's delta) and keep (of r_0 in that delta)
        cumulative, q = self._momenta(n0.device)
        seen = n0 + total
        share = torch.where(seen > 0, (n0 + mine) / seen.clamp(min=1.0), torch.zeros_like(seen))
        one = torch.ones_like(q)
        base = torch.where(cumulative, one, q.pow(total))
        weight = torch.where(cumulative, share, q.pow(after))
        keep = torch.where(cumulative, one, q.pow(mine))
        deltas = []
        for j, (m, (mean0, var0)) in enumerate(zip(self.layers, self._start, strict=True)):
            for now, start in ((m.running_mean, mean0), (m.running_var, var0)):
                deltas.append((weight[j] * (now.double() - keep[j] * start.double())).flatten())
        merged = dist.all_reduce_sum(torch.cat(deltas))
        # 3. r_S = base · r_0 + Σ_k delta_k, written back in the buffers' own dtype; n_0 + U updates
        at = 0
        tracked = seen.round().long()
        for j, (m, (mean0, var0)) in enumerate(zip(self.layers, self._start, strict=True)):
            for buf, start in ((m.running_mean, mean0), (m.running_var, var0)):
                n = buf.numel()
                buf.copy_((base[j] * start.double() + merged[at : at + n].view_as(buf)).to(buf.dtype))
                at += n
            m.num_batches_tracked.copy_(tracked[j])
        self._start = []

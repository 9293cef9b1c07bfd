"""BatchNorm running statistics that do not depend on how S is split over ranks (docs/design.md §1).

One model that sees the S micro-batches of an iteration in order updates each BatchNorm layer's running
mean and variance S times,

    r ← (1 − f)·r + f·x_i,      f = the layer's momentum, or 1/n for momentum None (a cumulative average
                                 over its n updates so far), x_i micro-batch i's batch mean (or unbiased
                                 variance),

and the bits it ends with depend on how each update is rounded. W ranks that each update their own copy
with their A micro-batches and are merged afterwards by any formula (a closed form with weights did this
before) end a few ulps away: 4e-9 from the first iteration on tiny cifar10, which training amplifies.

So no rank updates its running statistics in place. During an iteration every layer runs with momentum 1
and its three buffers point at the current micro-batch's own slots (`RunningStats.at`): torch's own
kernel writes x_i itself there (1·x + 0·r = x, exactly) and counts the layer's uses. At W > 1 the slots
of every rank ride on the iteration's one all-gather (bench.engine.loop.accumulate); every rank then
holds the statistics of all S micro-batches in index order and replays the S updates above in float64,
on the device, rounding once to the buffers' dtype at the end. W = 1 takes the same path, so every split
S = W × A, W = 1 included, runs the same arithmetic on the same numbers: the same bits
(tests/engine/test_batchnorm.py, and whole runs in tests/engine/test_distributed.py). The replay is not
torch's own per-update float32 rounding: it differs from that by rounding only (the tests hold 1e-6
relative), with one rounding instead of S.

A layer skipped by a micro-batch has count 0 there and is left alone by that update. A layer called twice
in one micro-batch (one BatchNorm shared by two places, which no task has) keeps only its second x in its
slots, so it cannot be replayed: the counts come to the host with the iteration's statistics (no extra read)
and the iteration fails with a one-line error naming the layer.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

_KEYS = ("running_mean", "running_var", "num_batches_tracked")


class RunningStats:
    """The running statistics of a model's BatchNorm layers, replayed per micro-batch (module docstring).

    Per iteration: `begin(A)`; `at(a)` before micro-batch a's forward; `local()` is the table of this rank's
    A rows ([A, width]: per layer its batch mean and unbiased variance, then one count per layer) and
    `overuse()` a device scalar, 1 + the index of a layer run twice in one micro-batch, else 0; `receive`
    takes the rows of all S micro-batches in order (W = 1: `local()`) with the host value of every rank's
    overuse; `end()` puts the real buffers back and replays. `abandon()` puts them back without a replay."""

    def __init__(self, named: list[tuple[str, _BatchNorm]]) -> None:
        self.names = [n for n, _ in named]
        self.layers = [m for _, m in named]
        dtypes = {m.running_mean.dtype for m in self.layers} | {m.running_var.dtype for m in self.layers}
        if len(dtypes) != 1:
            raise RuntimeError(f"BatchNorm running statistics of several dtypes ({sorted(map(str, dtypes))})")
        self.sizes = [m.running_mean.numel() for m in self.layers]
        self.stats_width = 2 * sum(self.sizes)
        self.width = self.stats_width + len(self.layers)
        self._stats: list[torch.Tensor] = []  # per layer [A, 2, C]: each micro-batch's mean and variance
        self._counts = torch.zeros(0)  # [A, L]: each micro-batch's uses of each layer
        self._views: list[list[tuple[torch.Tensor, ...]]] = []  # [micro-batch][layer] -> (mean, var, count)
        self._real: list[tuple[torch.Tensor, ...]] = []  # the layers' own buffers while an iteration runs
        self._momenta: list[float | None] = []
        self._const: tuple[torch.Tensor, ...] | None = None  # per element: layer; per layer: momentum, flags, ids
        self._received: tuple[torch.Tensor, float] | None = None

    @classmethod
    def for_model(cls, module: nn.Module) -> RunningStats | None:
        """None when the model has no BatchNorm layer that tracks running statistics."""
        named = [
            (name, m)
            for name, m in module.named_modules()
            if isinstance(m, _BatchNorm) and m.track_running_stats and m.running_mean is not None
        ]
        return cls(named) if named else None

    # -- during the iteration ------------------------------------------------------------------------------
    def begin(self, accum: int) -> None:
        """Zeroed rows for A micro-batches; every layer at momentum 1 with its buffers in row 0."""
        if self._real:  # the last iteration never ended (it raised): its buffers back first
            self.abandon()
        first = self.layers[0].running_mean
        if not self._stats or self._stats[0].shape[0] != accum or self._stats[0].device != first.device:
            # One tensor per layer (a BatchNorm's backward checks that its buffers were not modified since
            # its forward: views of one shared tensor would share that version count across layers) and
            # one for the counts (not saved for backward).
            self._stats = [first.new_zeros(accum, 2, n) for n in self.sizes]
            self._counts = first.new_zeros(accum, len(self.layers))
            self._views = [
                [(t[a, 0], t[a, 1], self._counts[a, j]) for j, t in enumerate(self._stats)] for a in range(accum)
            ]
        else:
            torch._foreach_zero_([*self._stats, self._counts])
        self._real = [tuple(m._buffers[k] for k in _KEYS) for m in self.layers]  # type: ignore[misc]
        self._momenta = [m.momentum for m in self.layers]
        self._constants(first.device)
        for m in self.layers:  # (a plain attribute: set in __dict__, past nn.Module.__setattr__'s checks)
            m.__dict__["momentum"] = 1.0  # the kernel writes the micro-batch's own statistics (1·x + 0·r)
        self._received = None
        self.at(0)

    def at(self, a: int) -> None:
        """Point every layer's buffers at micro-batch a's row (dictionary stores only: no device work)."""
        for m, (mean, var, count) in zip(self.layers, self._views[a], strict=True):
            b = m._buffers
            b["running_mean"], b["running_var"], b["num_batches_tracked"] = mean, var, count

    def local(self) -> torch.Tensor:
        """This rank's rows, [A, width] (the buffers' dtype): per layer its means and variances, then the counts."""
        assert self._stats, "begin() first"
        accum = self._counts.shape[0]
        return torch.cat([*(t.reshape(accum, -1) for t in self._stats), self._counts], dim=1)

    def store(self, name: str, mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor) -> None:
        """Fill one layer's rows from per-micro-batch copies ([A, C], [A, C], [A]): the batched path
        (bench.engine.batched), whose A micro-batches each update their own copy at momentum 1."""
        assert self._stats, "begin() first"
        j = self.names.index(name)
        self._stats[j][:, 0].copy_(mean)
        self._stats[j][:, 1].copy_(var)
        self._counts[:, j].copy_(count)

    def _constants(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(layer of each statistic, momentum per layer, cumulative-average flags, layer ids 1…L), made on the
        device once: a tensor built from host values on a GPU is a copy the host waits for."""
        if self._const is None or self._const[0].device != device:
            layer_of = torch.tensor([j for j, n in enumerate(self.sizes) for _ in range(2 * n)])
            momenta = torch.tensor([float(m or 0.0) for m in self._momenta], dtype=torch.float64)
            cumulative = torch.tensor([m is None for m in self._momenta])
            ids = torch.arange(1, len(self.sizes) + 1, dtype=torch.float32)
            self._const = tuple(t.to(device) for t in (layer_of, momenta, cumulative, ids))
        return self._const

    def overuse(self) -> torch.Tensor:
        """1 + the index of the last layer some micro-batch of this rank ran more than once, else 0 (a float32
        scalar on the device, for the iteration's one transfer)."""
        ids = self._constants(self._counts.device)[3]
        return ((self._counts > 1).any(0).float() * ids).amax()

    def receive(self, rows: torch.Tensor, overuse: float = 0.0) -> None:
        """The rows of all S micro-batches in index order ([S, width] or flat), and the largest overuse."""
        self._received = (rows.reshape(-1, self.width), overuse)

    # -- after it ------------------------------------------------------------------------------------------
    def abandon(self) -> None:
        """The layers' own buffers and momenta back, nothing replayed (an iteration that raised)."""
        for m, bufs, momentum in zip(self.layers, self._real, self._momenta, strict=True):
            m._buffers.update(zip(_KEYS, bufs, strict=True))
            m.__dict__["momentum"] = momentum
        self._real, self._received = [], None

    @torch.no_grad()
    def end(self) -> None:
        """Replay the S updates on the layers' own buffers; raises if a layer ran twice in a micro-batch."""
        if not self._real:
            return
        real, received = self._real, self._received
        self.abandon()
        if received is None:
            raise RuntimeError("RunningStats.end() before receive(): the rows of the S micro-batches never came")
        rows, overuse = received
        if overuse:
            name = self.names[int(overuse) - 1] or "the model"
            raise RuntimeError(
                f"BatchNorm layer {name!r} ran more than once in one micro-batch: its running statistics cannot "
                "be replayed in order (bench.engine.batchnorm); give each use its own layer"
            )
        layer_of, momenta, cumulative, _ = self._constants(rows.device)
        counts = rows[:, self.stats_width :].double()  # [S, L] uses per micro-batch (0 or 1)
        start = torch.stack([count for _, _, count in real]).double()
        factor = momenta.expand_as(counts)
        if None in self._momenta:  # (known on the host) a cumulative average: 1/n, n its updates so far
            factor = torch.where(cumulative, 1.0 / (start + counts.cumsum(0)).clamp(min=1.0), factor)
        factor = (factor * (counts > 0))[:, layer_of]  # [S, 2C]; a layer a micro-batch skipped: no update
        keep = 1.0 - factor
        x = rows[:, : self.stats_width].double()
        r = torch.cat([t.flatten() for mean, var, _ in real for t in (mean, var)]).double()
        for i in range(rows.shape[0]):  # the S updates in order, as one model makes them
            r.mul_(keep[i]).addcmul_(factor[i], x[i])
        bufs = [t for mean, var, _ in real for t in (mean, var)]
        torch._foreach_copy_(bufs, list(r.to(bufs[0].dtype).split(self._split())))  # (all 1-d, as the split)
        torch._foreach_copy_([c for _, _, c in real], list((start + counts.sum(0)).round().long().unbind()))

    def _split(self) -> list[int]:
        return [n for n in self.sizes for _ in (0, 1)]

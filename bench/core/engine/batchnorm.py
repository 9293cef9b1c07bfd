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
of every rank ride on the iteration's one all-gather (bench.core.engine.accumulate); every rank then
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
    `usage()` two device scalars, the fewest and the most uses of a layer in a micro-batch (a layer used twice
    is refused; one used once by every micro-batch, the usual case, makes the replay's factors constants);
    `receive` takes the rows of all S micro-batches in order (None at W = 1: this rank's own) with the host
    values of the usage over every rank; `end()` puts the real buffers back and replays. `abandon()` puts
    them back without a replay.

    On a CPU the first op of each kind after a backward pass costs ~20 µs (its code is out of the caches:
    measured on tiny cifar10), so the replay runs few kinds of ops, into buffers kept across iterations."""

    def __init__(self, named: list[tuple[str, _BatchNorm]]) -> None:
        self.names = [n for n, _ in named]
        self.layers = [m for _, m in named]
        dtypes = {m.running_mean.dtype for m in self.layers} | {m.running_var.dtype for m in self.layers}
        if len(dtypes) != 1:
            raise RuntimeError(f"BatchNorm running statistics of several dtypes ({sorted(map(str, dtypes))})")
        self.dtype = dtypes.pop()
        self.sizes = [m.running_mean.numel() for m in self.layers]
        self.stats_width = 2 * sum(self.sizes)
        self.width = self.stats_width + len(self.layers)
        self._stats: list[torch.Tensor] = []  # per layer [A, 2, C]: each micro-batch's mean and variance
        self._counts = torch.zeros(0, dtype=torch.long)  # [A, L]: each micro-batch's uses of each layer
        self._views: list[list[tuple[torch.Tensor, ...]]] = []  # [micro-batch][layer] -> (mean, var, count)
        self._real: list[tuple[torch.Tensor, ...]] = []  # the layers' own buffers while an iteration runs
        self._momenta: list[float | None] = []
        self._const: tuple[torch.Tensor, ...] | None = None  # per element: layer; per layer: momentum, flags
        self._received: tuple[torch.Tensor | None, tuple[float, float]] | None = None
        self._work: tuple[torch.Tensor, ...] = ()  # kept across iterations: [S, width] rows, flat r (float64)
        self._parts: list[torch.Tensor] = []  # views of r: per buffer
        self._xs: list[torch.Tensor] = []  # views of the table: per micro-batch, its statistics
        self._split = [n for n in self.sizes for _ in (0, 1)]  # the flat statistics back into mean, var per layer
        self._dicts = [m._buffers for m in self.layers]  # each layer's own dict (nn.Module never replaces it)

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
            # counts in int64, num_batches_tracked's own dtype: BatchNorm's forward adds 1 to its slot, and
            # a float add of the Python int costs more (0.8 µs a layer and micro-batch on a CPU)
            self._counts = first.new_zeros(accum, len(self.layers), dtype=torch.long)
            self._views = [
                [(t[a, 0], t[a, 1], self._counts[a, j]) for j, t in enumerate(self._stats)] for a in range(accum)
            ]
        else:
            torch._foreach_zero_([*self._stats, self._counts])
        self._real = [(b["running_mean"], b["running_var"], b["num_batches_tracked"]) for b in self._dicts]
        self._momenta = [m.momentum for m in self.layers]
        self._constants(first.device)
        for m in self.layers:  # (a plain attribute: set in __dict__, past nn.Module.__setattr__'s checks)
            m.__dict__["momentum"] = 1.0  # the kernel writes the micro-batch's own statistics (1·x + 0·r)
        self._received = None
        self.at(0)

    def at(self, a: int) -> None:
        """Point every layer's buffers at micro-batch a's row (dictionary stores only: no device work)."""
        for b, (mean, var, count) in zip(self._dicts, self._views[a], strict=True):
            b["running_mean"], b["running_var"], b["num_batches_tracked"] = mean, var, count

    def local(self) -> torch.Tensor:
        """This rank's rows, [A, width] (the buffers' dtype): per layer its means and variances, then the counts."""
        assert self._stats, "begin() first"
        return torch.cat(self._rows(), dim=1)

    def _rows(self) -> list[torch.Tensor]:
        accum = self._counts.shape[0]
        return [*(t.reshape(accum, -1) for t in self._stats), self._counts]

    def store(self, name: str, mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor) -> None:
        """Fill one layer's rows from per-micro-batch copies ([A, C], [A, C], [A]): the batched path
        (bench.core.engine.batched), whose A micro-batches each update their own copy at momentum 1."""
        assert self._stats, "begin() first"
        j = self.names.index(name)
        self._stats[j][:, 0].copy_(mean)
        self._stats[j][:, 1].copy_(var)
        self._counts[:, j].copy_(count)

    def _constants(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(layer of each statistic, momentum per layer, cumulative-average flags, momentum per statistic, and
        1 − it), made on the device once: a tensor built from host values on a GPU is a copy the host waits for."""
        if self._const is None or self._const[0].device != device:
            layer_of = torch.tensor([j for j, n in enumerate(self.sizes) for _ in range(2 * n)]).to(device)
            momenta = torch.tensor([float(m or 0.0) for m in self._momenta], dtype=torch.float64).to(device)
            cumulative = torch.tensor([m is None for m in self._momenta]).to(device)
            factor = momenta[layer_of]
            self._const = (layer_of, momenta, cumulative, factor, 1.0 - factor)
        return self._const

    def usage(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(fewest, most) uses of a layer in a micro-batch of this rank: int64 device scalars for the
        iteration's one transfer (which layer ran twice is found only then: the iteration fails)."""
        return torch.aminmax(self._counts)

    def receive(self, rows: torch.Tensor | None, usage: tuple[float, float] = (0.0, 1.0)) -> None:
        """The rows of all S micro-batches in index order ([S, width] or flat; None: this rank's own, at
        W = 1), and (fewest, most) uses of a layer in a micro-batch over every rank."""
        self._received = (rows.reshape(-1, self.width) if rows is not None else None, usage)

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
        rows, (fewest, most) = received
        table, r, parts, xs = self._workspace(rows.shape[0] if rows is not None else self._counts.shape[0])
        if rows is None:  # this rank's own rows, in float64 (exactly) at once
            torch.cat(self._rows(), dim=1, out=table)
        else:
            table.copy_(rows)
        if most > 1:  # (a host read, but the iteration fails) the last layer some micro-batch ran twice
            name = self.names[int((table[:, self.stats_width :] > 1).any(0).nonzero()[-1])] or "the model"
            raise RuntimeError(
                f"BatchNorm layer {name!r} ran more than once in one micro-batch: its running statistics cannot "
                "be replayed in order (bench.core.engine.batchnorm); give each use its own layer"
            )
        bufs = [t for mean, var, _ in real for t in (mean, var)]
        torch.cat(bufs, out=r)  # (all 1-d) in float64, exactly
        if fewest == 1 and None not in self._momenta:  # every layer once in every micro-batch: constant factors
            _, _, _, factor, keep = self._constants(table.device)
            for x in xs:  # the S updates in order, as one model makes them
                r.mul_(keep).addcmul_(factor, x)
            torch._foreach_add_([c for _, _, c in real], len(xs))
        else:
            self._replay(table, r, [c for _, _, c in real])
        torch._foreach_copy_(bufs, parts)  # rounded once, to the buffers' dtype

    def _replay(self, table: torch.Tensor, r: torch.Tensor, counters: list[torch.Tensor]) -> None:
        """The S updates with factors from the counts: layers some micro-batch skipped, cumulative averages.
        The same arithmetic as the constant path (momentum·1 = momentum, 1 − momentum), so the same bits."""
        layer_of, momenta, cumulative, _, _ = self._constants(table.device)
        counts = table[:, self.stats_width :]  # [S, L] uses per micro-batch, each 0 or 1
        factor = momenta.expand_as(counts)
        if None in self._momenta:  # (known on the host) a cumulative average: 1/n, n its updates so far
            start = torch.stack(counters).double()
            factor = torch.where(cumulative, 1.0 / (start + counts.cumsum(0)).clamp(min=1.0), factor)
        factor = (factor * counts)[:, layer_of]  # [S, 2C]; a layer a micro-batch skipped (count 0): no update
        keep = 1.0 - factor
        for k, f, x in zip(keep.unbind(), factor.unbind(), table[:, : self.stats_width].unbind(), strict=True):
            r.mul_(k).addcmul_(f, x)
        torch._foreach_add_(counters, list(counts.sum(0).long().unbind()))  # (integers: exact)

    def _workspace(self, rows: int) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """(the [S, width] float64 table, the flat float64 r, r's per-buffer parts, the S rows of statistics),
        made once per S and device and kept: views of kept tensors need no new ones every iteration."""
        device = self._counts.device
        if not self._work or self._work[0].shape[0] != rows or self._work[0].device != device:
            table = torch.empty(rows, self.width, dtype=torch.float64, device=device)
            r = torch.empty(self.stats_width, dtype=torch.float64, device=device)
            self._work = (table, r)
            self._parts = list(r.split(self._split))
            self._xs = list(table[:, : self.stats_width].unbind())
        table, r = self._work
        return table, r, self._parts, self._xs

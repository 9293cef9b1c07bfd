"""BatchNorm running statistics replayed per micro-batch (bench.core.engine.batchnorm): every split S = W × A ends
with the same bits, W = 1 included; the replay is the sequential update up to rounding; the rows ride on the
iteration's one gather; a layer run twice in a micro-batch is refused. The end-to-end check on real runs
(cifar10 and imagenet, W = 1, 2, 4 as gloo processes, evaluation loss included) is in test_distributed.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from bench.core.engine.accumulate import accumulate
from bench.core.engine.batchnorm import RunningStats
from bench.core.engine.distributed import Dist
from bench.experiments.syncs import count_host_syncs
from tests.helpers import run_ranks


class BNNet(nn.Module):
    """Two ways a layer meets the micro-batches: every one (momentum 0.1), and a cumulative average
    (momentum None) used only by micro-batches whose first value is > 0 (so some skip it)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.sometimes = nn.BatchNorm2d(6, momentum=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.conv(x))
        return self.sometimes(h) if float(x[0, 0, 0, 0]) > 0 else h


def _stats(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}


def _iterations(S: int, count: int) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [[torch.randn(4, 3, 5, 5, generator=g) * 2 + 1 for _ in range(S)] for _ in range(count)]


def _split_run(world: int, data: list[list[torch.Tensor]], order: slice = slice(None)) -> list[nn.Module]:
    """W model copies, each running its A micro-batches into its rows; the rows of all ranks concatenated in
    rank order (what the gather gives; `order` reorders the ranks, to show that order matters) and replayed
    on every copy."""
    torch.manual_seed(0)
    ranks = [BNNet() for _ in range(world)]
    for m in ranks[1:]:
        m.load_state_dict(ranks[0].state_dict())
    stats = [RunningStats.for_model(m) for m in ranks]
    for mbs in data:
        accum = len(mbs) // world
        for k, (model, bn) in enumerate(zip(ranks, stats, strict=True)):
            bn.begin(accum)  # type: ignore[union-attr]
            for a, x in enumerate(mbs[k * accum : (k + 1) * accum]):
                bn.at(a)  # type: ignore[union-attr]
                model(x)
        rows = torch.cat([bn.local() for bn in stats][order])  # type: ignore[union-attr]
        for bn in stats:
            bn.receive(rows)  # type: ignore[union-attr]
            bn.end()  # type: ignore[union-attr]
    return ranks


def test_every_split_ends_with_the_same_bits_and_the_sequential_statistics() -> None:
    S, data = 8, _iterations(8, 3)
    one = _split_run(1, data)[0]
    want = _stats(one)
    used = int(want["sometimes.num_batches_tracked"])
    assert 0 < used < S * 3  # the conditional layer was skipped by some micro-batches
    for world in (2, 4, 8):
        for model in _split_run(world, data):
            got = _stats(model)
            for key, value in want.items():
                assert torch.equal(got[key], value), (world, key)
    # what it replays is the sequential update (torch's own, one micro-batch after another), to rounding
    torch.manual_seed(0)
    seq = BNNet()
    for mbs in data:
        for x in mbs:
            seq(x)
    for key, value in _stats(seq).items():
        if "num_batches" in key:
            assert torch.equal(want[key], value), key
        else:
            torch.testing.assert_close(want[key], value, rtol=1e-6, atol=1e-7, msg=key)
    # the check can fail: the same rows replayed in another order give other statistics
    swapped = _stats(_split_run(2, data, slice(None, None, -1))[0])
    assert not torch.equal(swapped["bn.running_mean"], want["bn.running_mean"])


class Twice(nn.Module):
    """One BatchNorm used at two places of the forward pass: its running statistics cannot be replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.shared = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.shared(self.shared(self.conv(x))).mean((2, 3)))


class CE:
    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)


def _batches(S: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 5, (6,), generator=g)) for _ in range(S)]


def test_a_layer_run_twice_in_a_micro_batch_is_refused_and_its_buffers_come_back() -> None:
    model = Twice()
    real = model.shared.running_mean
    bn = RunningStats.for_model(model)
    assert bn is not None
    bn.begin(2)
    accumulate(model, CE(), iter(_batches(2)), [0, 1], list(model.parameters()), None, 2, Dist(), bn=bn)
    with pytest.raises(RuntimeError, match="'shared' ran more than once in one micro-batch"):
        bn.end()
    assert model.shared.running_mean is real and model.shared.momentum == 0.1
    # a layer used once per micro-batch (BNNet's) passes through the same path
    net = BNNet()
    stats = RunningStats.for_model(net)
    stats.begin(1)  # type: ignore[union-attr]
    net(torch.randn(4, 3, 5, 5) + 1)
    fewest, most = stats.usage()  # type: ignore[union-attr]
    stats.receive(stats.local(), (float(fewest), float(most)))  # type: ignore[union-attr]
    stats.end()  # type: ignore[union-attr]
    assert int(net.bn.num_batches_tracked) == 1


def test_the_replay_reads_nothing_on_the_host() -> None:
    """`end` stays on the device (a GPU run would stall at a read); the W = 1 iteration keeps its one transfer."""
    model = BNNet()
    bn = RunningStats.for_model(model)
    assert bn is not None
    for read, want in ((False, 0), (True, 1)):
        bn.begin(2)
        for a in range(2):
            bn.at(a)
            model(torch.randn(4, 3, 5, 5) + 1)
        bn.receive(bn.local())

        def end(read: bool = read) -> None:
            bn.end()  # type: ignore[union-attr]
            if read:  # what a host-side replay would do: read the counts
                model.bn.num_batches_tracked.tolist()

        assert count_host_syncs(end)[0] == want
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.LazyLinear(5))
    net(torch.randn(2, 3, 8, 8))
    params = list(net.parameters())
    stats = RunningStats.for_model(net)

    def step() -> None:
        stats.begin(2)  # type: ignore[union-attr]
        accumulate(net, CE(), iter(_batches(2)), [0, 1], params, None, 2, Dist(), bn=stats)
        stats.end()  # type: ignore[union-attr]
        net.zero_grad(set_to_none=True)

    assert count_host_syncs(step)[0] == 1


def test_no_replay_without_batchnorm() -> None:
    assert RunningStats.for_model(nn.Linear(3, 1)) is None
    assert RunningStats.for_model(nn.BatchNorm1d(3, track_running_stats=False)) is None


# -- W = 2 gloo ranks: the rows ride on accumulate's one gather --------------------------------------------
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


def _iterate(model: nn.Module, rank: int, world: int) -> list[float]:
    """Three iterations at S = 4 on this rank's share (no optimizer step: only the statistics move); the host
    syncs per iteration."""
    params, bn, S = list(model.parameters()), RunningStats.for_model(model), 4
    accum, syncs = S // world, []
    for i in range(3):
        mbs = _batches(S + i)[i:]
        mine = mbs[rank * accum : (rank + 1) * accum]

        def step(mine: list = mine) -> None:
            bn.begin(accum)  # type: ignore[union-attr]
            accumulate(model, CE(), iter(mine), list(range(accum)), params, None, S, Dist(rank, world), bn=bn)
            bn.end()  # type: ignore[union-attr]
            model.zero_grad(set_to_none=True)

        syncs.append(count_host_syncs(step)[0])
    return syncs


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = Net()
        syncs = _iterate(model, rank, world)
        state = {k: v.tolist() for k, v in _stats(model).items()}
        Path(out, f"rank{rank}.json").write_text(json.dumps({"syncs": syncs, "stats": state}))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_rows_ride_on_the_gather_and_two_ranks_end_as_one(tmp_path: Path) -> None:
    run_ranks(_rank, str(tmp_path))
    torch.manual_seed(0)
    one = Net()
    assert _iterate(one, 0, 1) == [1, 1, 1]
    want = {k: v.tolist() for k, v in _stats(one).items()}
    assert want["bn.num_batches_tracked"] == 12
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["syncs"] == [1, 1, 1]  # the rows came with the iteration's one transfer
        assert got["stats"] == want  # bit for bit (lists of the same floats)


def test_a_micro_batchs_slots_have_the_layers_dtypes() -> None:
    """BatchNorm's forward adds 1 to num_batches_tracked in every layer and micro-batch: its slot is int64 as the
    real buffer is (a float slot made that add a float add of a Python int, dearer on the hot path), and the
    statistics' slots have the running buffers' dtype."""
    net = BNNet()
    stats = RunningStats.for_model(net)
    assert stats is not None
    real = dict(net.bn.named_buffers())
    stats.begin(2)
    for name, slot in net.bn.named_buffers():
        assert slot is not real[name] and slot.dtype == real[name].dtype, name
    stats.abandon()
    assert dict(net.bn.named_buffers()) == real

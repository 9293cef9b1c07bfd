"""`adascale-bench comm`: the gradient exchange of `reduction=pairwise` against DDP's own (`native`).

W gloo ranks on this machine (torch.multiprocessing), each with the same paper-size model (default:
torchvision's ResNet-50, 25.6 M parameters, 102 MB of float32 gradient) wrapped in DDP, two copies: one
with bench.core.engine.reduction's pairwise hook, one with DDP's bucketed all-reduce. Per round each copy runs
one forward + backward (on a small input, so that the exchange is a large share of the time) and the
two are timed alternately, first one then the other, so that the machine's load hits both alike; the ratio
pairwise / native is the median of the per-round ratios, printed with each W's medians.

What differs: the pairwise hook waits for each of its log2(W) exchanges of a whole bucket inside the
hook (the backward pass stops until it returns), while DDP's all-reduce runs asynchronously and overlaps
the rest of the backward pass; a ring all-reduce sends ~2 (W−1)/W of the gradient per rank, recursive
doubling log2(W) times all of it.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

MODELS = {"resnet50": (224, 1000), "resnet18": (224, 1000)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, model: str, image: int, rounds: int, out: Any) -> None:
    from bench.core.engine.distributed import from_env, shutdown

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    from_env("cpu")
    try:
        times = _rounds(model, image, rounds)  # its DDP copies are gone when it returns: shutdown ends the group
        if rank == 0:
            out.put(times)
    finally:
        shutdown()


def _rounds(model: str, image: int, rounds: int) -> dict[str, list[float]]:
    import torch.distributed as dist
    import torchvision

    from bench.core.engine.reduction import pairwise_allreduce_hook

    torch.manual_seed(0)
    nets = {}
    for kind in ("native", "pairwise"):
        ddp = torch.nn.parallel.DistributedDataParallel(getattr(torchvision.models, model)())
        if kind == "pairwise":
            ddp.register_comm_hook(None, pairwise_allreduce_hook)
        nets[kind] = ddp
    x = torch.randn(2, 3, image, image)
    times: dict[str, list[float]] = {k: [] for k in nets}
    for r in range(rounds + 1):  # the first round warms up
        for kind in ("native", "pairwise") if r % 2 == 0 else ("pairwise", "native"):
            dist.barrier()
            start = time.perf_counter()
            nets[kind](x).sum().backward()
            elapsed = time.perf_counter() - start
            if r:
                times[kind].append(elapsed)
    return times


def measure(world: int, model: str = "resnet50", image: int = 32, rounds: int = 5) -> dict[str, Any]:
    """Median seconds per forward + backward + exchange of each reduction at W ranks, and their ratio."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_worker, (world, _free_port(), model, image, rounds, queue), nprocs=world, start_method="spawn")
    times = queue.get()
    ratios = [p / n for p, n in zip(times["pairwise"], times["native"], strict=True)]
    return {
        "ranks": world,
        "native_s": statistics.median(times["native"]),
        "pairwise_s": statistics.median(times["pairwise"]),
        "pairwise_over_native": statistics.median(ratios),
        "rounds": rounds,
    }


@dataclass(frozen=True)
class CommOptions:
    """`adascale-bench comm`'s options, typed."""

    ranks: list[int] = field(default_factory=lambda: [2, 4])  # the W to measure
    model: str = "resnet50"  # one of MODELS
    image: int = 32  # input side (small: the exchange dominates)
    rounds: int = 5  # alternating rounds per W


def comm(args: CommOptions) -> int:
    params = None
    import torchvision

    params = sum(p.numel() for p in getattr(torchvision.models, args.model)().parameters())
    print(
        f"{args.model}: {params / 1e6:.1f} M parameters ({params * 4 / 1e6:.0f} MB of float32 gradient), "
        f"input 2×3×{args.image}×{args.image}, gloo on this machine, {args.rounds} alternating rounds"
    )
    print(f"{'W':>3}  {'native s':>9}  {'pairwise s':>10}  {'pairwise/native':>15}")
    for world in args.ranks:
        r = measure(world, args.model, args.image, args.rounds)
        print(f"{world:>3}  {r['native_s']:>9.3f}  {r['pairwise_s']:>10.3f}  {r['pairwise_over_native']:>15.2f}")
    print(
        "per round: one forward + backward through DDP, whose gradient exchange is DDP's bucketed all-reduce "
        "(native, overlapping the backward) or the pairwise hook (blocking, log2 W whole-bucket exchanges)"
    )
    return 0

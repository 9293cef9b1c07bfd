"""One iteration's gradients: each of this rank's A micro-batches forward and backward on its own, ḡ left
in `.grad`, and (loss, sum_sq, mean_sq) on the host in one transfer, exactly rounded (the iteration's one
synchronisation). Dropout seeds are a function of the micro-batch's position in the stream."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bench.core.engine.batchnorm import RunningStats
from bench.core.engine.distributed import Dist
from bench.core.engine.gradstats import GradientObserver
from bench.core.engine.seeding import mix
from bench.core.engine.task import Task

_DROPOUT_STREAM = 0x0D20


def seed_generators(seed: int, device: torch.device) -> None:
    """Seed the CPU generator and the run's CUDA device only (torch.manual_seed would also queue a lazy
    seeding of every CUDA device, with a stack trace, on each call)."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.default_generators[device.index or 0].manual_seed(seed)


def dropout_seeds(seed: int, first: int, count: int) -> list[int]:
    """The RNG seeds of micro-batches first … first + count − 1 of the global stream (dropout and the
    like): a function of the micro-batch, so any split S = W × A and any resume draw the same masks."""
    return [mix(seed, first + a, _DROPOUT_STREAM) for a in range(count)]


@dataclass
class StopVote:
    """This rank's wish to stop (a signal arrived), carried by the iteration's one gather so that every
    rank learns whether any rank wants to stop without a collective and a host read of its own."""

    mine: bool
    anyone: bool = False


def accumulate(
    model: nn.Module,
    task: Task,
    microbatches: Iterable[Any],
    seeds: list[int],
    params: list[nn.Parameter],
    observer: GradientObserver | None,
    scale: int,
    dist: Dist,
    vote: StopVote | None = None,
    bn: RunningStats | None = None,
) -> tuple[float, float, float]:
    """Forward and backward each of this rank's A micro-batches separately, leave ḡ = (1/S) Σ_i g_i in
    `.grad`, and return (mean loss, sum_sq, mean_sq) over all S micro-batches of all ranks.

    The first A − 1 backward passes skip DDP's all-reduce (no_sync); the last one averages the
    accumulated gradients over the W ranks, so `.grad` holds A·ḡ and is divided by A. sum_sq comes from
    the observer (bench.core.engine.reduction.SplitInvariance.observer; none or not tracking: S = 1, where
    sum_sq = mean_sq, or statistics off, where it is NaN).

    Everything stays on the device until one transfer at the end (the only host sync of the iteration):
    the A losses and the norms of every g_i's and of ḡ's tensors (float32), squared exactly in float64 and
    summed with math.fsum on the host. The sums are thus exactly rounded, so they do not depend on the
    order of the terms, nor on how S is split into W × A (for W > 1 the ranks' terms are all-gathered,
    not all-reduced). Few small ops, because on tiny models every op's fixed cost shows (see
    `adascale-bench perf`). A `vote` rides on the same gather (its `anyone` is set on every rank), and so
    do `bn`'s rows: each micro-batch's BatchNorm statistics (bench.core.engine.batchnorm), which every rank
    receives for all S micro-batches in order."""
    accum = len(seeds)
    losses = _passes(model, task, microbatches, seeds, observer, dist, bn)
    kept, observed = observer.take() if observer is not None else ([], [])
    grads = [p.grad for p in params if p.grad is not None]
    if accum > 1:
        torch._foreach_div_(grads, accum)
    norms = torch._foreach_norm([*kept, *grads] if kept else grads)  # one fused op: kept g_i, then ḡ's tensors
    n_obs = len(observed) + len(kept)
    if dist.world == 1:  # [A losses | norms of the g_i | of ḡ | BatchNorm usage], exact as floats
        host = torch.stack([*losses, *observed, *norms, *(bn.usage() if bn is not None else ())]).tolist()
        if bn is not None:
            bn.receive(None, (host[-2], host[-1]))  # (its own rows: nothing to gather)
            del host[-2:]
        if vote is not None:
            vote.anyone = vote.mine
        loss_total = math.fsum(host[:accum])
        sum_sq = math.fsum(v * v for v in host[accum : accum + n_obs])
        mean_sq = math.fsum(v * v for v in host[accum + n_obs :])
    else:
        loss_total, sum_sq, mean_sq = _gathered(torch.stack([*losses, *observed, *norms]), accum, n_obs, dist, vote, bn)
    if observer is None or not observer.tracks:
        sum_sq = mean_sq if scale == 1 else math.nan
    return loss_total / scale, sum_sq, mean_sq


def _passes(
    model: nn.Module,
    task: Task,
    microbatches: Iterable[Any],
    seeds: list[int],
    observer: GradientObserver | None,
    dist: Dist,
    bn: RunningStats | None,
) -> list[torch.Tensor]:
    """This rank's A forward and backward passes; returns the A losses, on the device. Under DDP the first
    A − 1 backward passes skip its all-reduce (no_sync), and the observer is told which pass DDP all-reduces
    in place (`synced`)."""
    ddp = isinstance(model, nn.parallel.DistributedDataParallel)
    last = len(seeds) - 1
    losses: list[torch.Tensor] = []
    for a, (batch, seed) in enumerate(zip(microbatches, seeds, strict=True)):
        seed_generators(seed, dist.device)  # dropout and the like: a function of the micro-batch
        if bn is not None:
            bn.at(a)  # this micro-batch's BatchNorm statistics go to its own row
        if ddp and a < last:
            with model.no_sync():  # type: ignore[operator]
                loss = task.loss(model, batch)
                loss.backward()
        else:
            if ddp and observer is not None:
                observer.synced = True  # DDP all-reduces this pass's .grad in place
            loss = task.loss(model, batch)
            loss.backward()
        if observer is not None:
            observer.end_backward()
            observer.synced = False
        losses.append(loss.detach())
    return losses


def _gathered(
    mine: torch.Tensor, accum: int, n_obs: int, dist: Dist, vote: StopVote | None, bn: RunningStats | None
) -> tuple[float, float, float]:
    """accumulate's end at W > 1: every rank's losses, g_i norms, stop vote and BatchNorm rows (ḡ is the
    same on every rank), in one all-gather and one transfer; returns (Σ losses, Σ||g_i||², ||ḡ||²) over all
    ranks, exactly rounded."""
    import torch.distributed as torch_dist

    over = [torch.stack(bn.usage()).to(mine.dtype)] if bn is not None else []  # a layer's fewest, most uses
    flag = torch.full((1,), float(vote is not None and vote.mine), dtype=mine.dtype, device=mine.device)
    small = torch.cat([mine[: accum + n_obs], flag, *over])  # what comes to the host
    rows = [bn.local().to(mine.dtype).flatten()] if bn is not None else []  # stays on the device
    part = torch.cat([small, *rows])  # (equal lengths: DDP and pairwise use every parameter)
    parts = [torch.empty_like(part) for _ in range(dist.world)]
    torch_dist.all_gather(parts, part)
    k = len(small)
    host = torch.cat([*(p[:k] for p in parts), mine[accum + n_obs :]]).tolist()  # one transfer
    mine_of = [host[r * k : r * k + accum + n_obs] for r in range(dist.world)]
    if vote is not None:
        vote.anyone = any(host[r * k + accum + n_obs] > 0 for r in range(dist.world))
    if bn is not None:
        fewest = min(host[r * k + accum + n_obs + 1] for r in range(dist.world))
        most = max(host[r * k + accum + n_obs + 2] for r in range(dist.world))
        bn.receive(torch.cat([p[k:] for p in parts]).to(bn.dtype), (fewest, most))
    loss_total = math.fsum(v for row in mine_of for v in row[:accum])
    sum_sq = math.fsum(v * v for row in mine_of for v in row[accum:])
    mean_sq = math.fsum(v * v for v in host[dist.world * k :])
    return loss_total, sum_sq, mean_sq

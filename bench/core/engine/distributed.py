"""Process-group context: who this process is among the W data-parallel ranks, and its device.

A run at scale S is split over W ranks that each accumulate A = S / W micro-batches (docs/design.md §1). W is
fixed for one process group; a run whose S schedule needs another W (spec key `accumulation`: A is
held fixed, so W_t = S_t / A) checkpoints and raises `bench.core.engine.signals.RanksChange(ranks)`, and whoever
launched it (bench.run.launch locally, the SLURM submitter on a cluster) starts it again with that many ranks.
"""

from __future__ import annotations

import gc
import importlib
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from bench.core.errors import UserError

TIMEOUT_ENV = "ADASCALE_BENCH_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0  # a collective waits this long for a silent peer before the job fails (no spec)


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def broadcast(self, value: Any) -> Any:
        """Rank 0's value of a picklable object, on every rank (pickled once on rank 0 and sent as one
        tensor: fine for a data set's sample list of a million entries, tens of MB)."""
        if self.world == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_objects(self, value: Any) -> list[Any] | None:
        """Every rank's small picklable object, in rank order, on rank 0 (None on the other ranks)."""
        if self.world == 1:
            return [value]
        out: list[Any] | None = [None] * self.world if self.is_main else None
        dist.gather_object(value, out, dst=0)
        return out

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on some rank: ranks must agree on when to stop, even when a
        signal reaches them in different iterations."""
        if self.world == 1:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())


def pick_device(choice: str, local_rank: int = 0) -> torch.device:
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("--set device=cuda asked for, but no CUDA device is visible")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def timeout_s(value: float | str | None = None) -> float:
    """The process-group timeout in seconds: `value` (the spec's `collective_timeout_s`), else
    $ADASCALE_BENCH_DIST_TIMEOUT, else 300. The environment variable wins over the spec when set, so a
    test or an operator can shorten it for one job without changing the run's spec."""
    env = os.environ.get(TIMEOUT_ENV)
    raw, name = (env, TIMEOUT_ENV) if env not in (None, "") else (value, "collective_timeout_s")
    if raw is None or raw == "":
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        raise UserError(f"{name}={raw!r} is not a number of seconds") from None
    if not seconds > 0:
        raise UserError(f"{name}={raw!r} is not a positive number of seconds")
    return seconds


def from_env(device: str = "auto", timeout: float | None = None, store: Any = None) -> Dist:
    """This process's place in the job, from torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, set by
    torch's elastic launcher, torchrun, or a SLURM wrapper); a single process when they are absent.
    Initialises the default process group when W > 1 (gloo on CPU, NCCL on CUDA), with a bounded
    timeout so that a rank that stops answering fails the job instead of hanging it. `store`: a
    torch.distributed Store the ranks have already joined (slurm/procgroup.py), instead of `env://`."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local)
    if world > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        # Before the group exists: torch.distributed.nn.functional's collectives take `group=group.WORLD` as
        # a default argument, evaluated at import. Imported later (DDP's constructor does), they would hold
        # this group for the life of the process, and destroy_process_group could not end its threads.
        importlib.import_module("torch.distributed.nn")
        dist.init_process_group(
            "nccl" if dev.type == "cuda" else "gloo",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=timeout_s(timeout)),
            store=store,
        )
    return Dist(rank=rank, world=world, local_rank=local, device=dev)


def shutdown() -> None:
    """Destroy the default process group, if any, and its backend's threads with it, while the interpreter
    is whole (torch also warns at exit about a group left alive).

    A group that outlives this call keeps its worker threads into interpreter finalization, where a gloo
    worker that drops a finished work's tensors needs the GIL; Python ends such a thread with
    pthread_exit, and that unwinding through a noexcept destructor is `terminate called without an
    active exception`. Seen on SLURM (core dump: ProcessGroupGloo::runLoop releasing an
    AsyncBarrierWork under Py_FinalizeEx): a rank whose run had completed aborted at exit, and srun's
    --kill-on-bad-exit failed the job. Two things kept the group alive: torch.distributed.nn's default
    arguments (from_env imports it first), and the DDP wrapper when the engine is reachable only from
    garbage cycles (the frames of an exception caught under the run, or of a module's first import in
    it). Hence: collect first (the wrappers go while the group is still registered), then destroy
    (torch's binding releases the GIL while the group's destructor drains and joins its threads), then
    collect what that left."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
        gc.collect()


def ranks_for(accum: int | None, scale: int, world: int) -> int:
    """How many ranks scale S needs: S / A when the spec fixes the accumulation A (its `accumulation`, a positive
    integer: the schema's), else the current W."""
    if accum is None:
        if scale % world:
            raise UserError(f"scale {scale} is not a multiple of {world} ranks")
        return world
    if scale % accum:
        raise UserError(f"scale {scale} is not a multiple of accumulation {accum}")
    return scale // accum

"""Process-group context: who this process is among the W data-parallel ranks, and its device."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


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
        """Rank 0's value of a small picklable object, on every rank."""
        if self.world == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t


def pick_device(choice: str, local_rank: int = 0) -> torch.device:
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        from .errors import UserError

        raise UserError("--set device=cuda asked for, but no CUDA device is visible")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def from_env(device: str = "auto") -> Dist:
    """This process's place in the job, from torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK); a
    single process when they are absent. Initialises the default process group when W > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local)
    if world > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=rank, world_size=world)
    return Dist(rank=rank, world=world, local_rank=local, device=dev)

"""Speed settings of a run: bf16 autocast (spec `amp`) and the standard CUDA knobs.

`amp: bf16` runs each micro-batch's forward pass (the task's loss) under torch.autocast with bfloat16:
matrix products and convolutions in bf16, reductions and the loss in float32; the parameters, their
gradients, the gradient statistics and the optimizer stay float32 (bf16 needs no loss scaling). It
changes the arithmetic, hence the results: off in every preset, and part of a run's identity.

On CUDA the engine also sets `torch.backends.cudnn.benchmark` (fixed shapes per task: the fastest
convolution algorithms are picked once) and puts convolutional models in channels-last memory format.
Batches are already copied from pinned memory with non_blocking=True (bench.core.engine.data).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


@contextlib.contextmanager
def autocast(mode: str, device: torch.device) -> Iterator[None]:
    if mode == "bf16":
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            yield
    else:
        yield


class AutocastLoss:
    """The task, with its loss computed under autocast (everything else passed through)."""

    def __init__(self, task: Any, mode: str, device: torch.device) -> None:
        self._task, self._mode, self._device = task, mode, device

    def loss(self, model: Any, batch: Any) -> torch.Tensor:
        with autocast(self._mode, self._device):
            return self._task.loss(model, batch).float()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)


def with_amp(task: Any, amp: str, device: torch.device) -> Any:
    """`task`, or a wrapper whose loss runs under bf16 autocast when the spec's `amp` asks for it (its values: the
    schema's)."""
    return task if amp == "none" else AutocastLoss(task, amp, device)


def cuda_speed_knobs(module: nn.Module, device: torch.device) -> nn.Module:
    """cudnn.benchmark, and channels-last for models with 2-d convolutions, on CUDA; nothing elsewhere."""
    if device.type != "cuda":
        return module
    torch.backends.cudnn.benchmark = True
    if any(isinstance(m, nn.Conv2d) for m in module.modules()):
        module = module.to(memory_format=torch.channels_last)
    return module

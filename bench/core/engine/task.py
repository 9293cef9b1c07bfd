"""What the one training engine needs of a task: the `Task` protocol, at the engine's level so that the
engine names what it calls (tasks.base.Task, the base class every task adapter derives from, satisfies
it; tasks/base.py's docstring says how the engine uses each method).

A task owns its model, its data on disk, its loss and its evaluation; never an optimizer loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from bench.core.runspec import RunSpec


class TrainSet(Protocol):
    """A map-style dataset indexed by `(index, key)`, with its own collate function."""

    def __len__(self) -> int: ...

    def __getitem__(self, item: tuple[int, int]) -> Any: ...

    def collate(self, samples: Sequence[Any]) -> Any: ...


@runtime_checkable
class Task(Protocol):
    """A task as the engine drives it: its metric, model, data sets, loss and (sharded) evaluation."""

    name: str
    metric: str  # the key of the Table 2 metric in the evaluation's result
    higher_is_better: bool

    def items_per_microbatch(self, cfg: RunSpec) -> int: ...

    def build_model(self, cfg: RunSpec) -> nn.Module: ...

    def samples(self, cfg: RunSpec, root: Path, split: str) -> list[Any] | None: ...

    def train_set(self, cfg: RunSpec, root: Path) -> TrainSet: ...

    def eval_set(self, cfg: RunSpec, root: Path) -> Any: ...

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor: ...

    def eval_stats(
        self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device, rank: int = 0, world: int = 1
    ) -> dict[str, Any]: ...

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]: ...

    def evaluate(self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device) -> dict: ...

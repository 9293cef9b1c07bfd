"""Synthetic training data of a task's real shapes, for `adascale-bench perf --synthetic`: the overhead
benchmark runs a preset's model on random data without its dataset (e.g. all five paper models on a GPU
machine that has none of them).

The data is the task's own fact: a task that can do without its data set has `synthetic_set(cfg)` (random
images for cifar10 and imagenet, tasks/<task>/synthetic.py's batches for speech, transformer and yolo; see
tasks.synthetic) and may have `synthetic_model(cfg)`, for a model whose size otherwise comes from the data
(transformer: the dictionary). logreg makes its own data in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bench.errors import UserError
from bench.runspec import RunSpec


class SyntheticData:
    """A task with synthetic training data of the real shapes (perf --synthetic): no data root needed."""

    def __init__(self, task: Any) -> None:
        self._task = task
        if task.needs_data and not hasattr(task, "synthetic_set"):
            raise UserError(f"perf --synthetic: no synthetic data for {task.name}; pass --data-root")

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        """Nothing on disk to check."""

    def samples(self, cfg: RunSpec, root: Path, split: str) -> None:
        """No files to list (the engine then builds the sets below without a shared list)."""

    def build_model(self, cfg: RunSpec) -> torch.nn.Module:
        return getattr(self._task, "synthetic_model", self._task.build_model)(cfg)

    def train_set(self, cfg: RunSpec, root: Path) -> Any:
        if not self._task.needs_data:
            return self._task.train_set(cfg, root)
        return self._task.synthetic_set(cfg)

    def eval_set(self, cfg: RunSpec, root: Path) -> Any:
        return None if self._task.needs_data else self._task.eval_set(cfg, root)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)

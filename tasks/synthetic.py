"""`adascale-bench perf --synthetic` in one place: random training data of a task's real shapes, and the task
that trains on it. A task that can train without its data set returns one of these sets from
`synthetic_set(cfg)` (tasks.base.Task), and may have `synthetic_model(cfg)` for a model whose size otherwise
comes from the data (transformer: the dictionary); `SyntheticData` wraps the task so the overhead benchmark
and the FLOP count run a paper model on a machine that has none of the data (logreg makes its own data in
memory). Nothing is read from disk, and a micro-batch is a pure function of its first item's key.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from bench.core.errors import UserError
from bench.core.runspec import RunSpec

ITEMS = 1 << 20  # items of a synthetic TrainSet: more than any benchmark draws


def _generator(keys: list[int]) -> torch.Generator:
    return torch.Generator().manual_seed(int(keys[0]) & 0x7FFFFFFF)


class SyntheticImages:
    """A TrainSet of random images and labels of the preset's shapes: (3, size, size) float32, labels
    below num_classes; each micro-batch drawn from its first item's key (nothing read from disk)."""

    def __init__(self, shape: tuple[int, ...], classes: int, n: int = ITEMS) -> None:
        self.shape, self.classes, self.n = shape, classes, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: tuple[int, int]) -> int:
        return item[1]

    def collate(self, keys: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        g = _generator(keys)
        images = torch.randn(len(keys), *self.shape, generator=g)
        return images, torch.randint(0, self.classes, (len(keys),), generator=g)


class SyntheticBatches:
    """A TrainSet whose items are their keys and whose collate draws the batch of that many items from
    `make(generator, items)` (a task's tasks/<task>/synthetic.py `synthetic_batch`, which returns exactly
    what the task's collate returns), the generator seeded by the first key."""

    def __init__(self, make: Callable[[torch.Generator, int], Any], n: int = ITEMS) -> None:
        self.make, self.n = make, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: tuple[int, int]) -> int:
        return item[1]

    def collate(self, keys: list[int]) -> Any:
        return self.make(_generator(keys), len(keys))


def synthetic_module(package: str) -> ModuleType:
    """A task package's `synthetic` module (its `synthetic_batch(cfg, generator, items)` returns exactly
    what the task's collate returns; it may also have `build_model(cfg)`), imported only when perf asks:
    it builds on the package, which therefore does not import it."""
    return importlib.import_module(f"{package}.synthetic")


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

"""Synthetic training data of a task's real shapes, for `adascale-bench perf --synthetic`: the overhead
benchmark runs a preset's model on random data without its dataset (e.g. all five paper models on a GPU
machine that has none of them).

- cifar10, imagenet: `SyntheticImages`, random (3, size, size) images and labels below num_classes;
- speech, transformer, yolo: `SyntheticBatches` over the task package's `synthetic` module
  (tasks/<task>/synthetic.py), whose `synthetic_batch(cfg, generator, items)` returns exactly the batch
  the task's collate returns for `items` TrainSet items, of the preset's shapes (its docstring says
  which lengths, durations and box counts it draws); a module may also have `build_model(cfg)`, for a
  model whose size otherwise comes from the data (transformer: the dictionary);
- logreg: its own in-memory data.

Nothing is read from disk, and a micro-batch is a pure function of its first item's key.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from bench.errors import UserError

IMAGES = ("cifar10", "imagenet")
MODULES = {name: f"tasks.{name}.synthetic" for name in ("speech", "transformer", "yolo")}
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
    `make(generator, items)`, the generator seeded by the first key."""

    def __init__(self, make: Callable[[torch.Generator, int], Any], n: int = ITEMS) -> None:
        self.make, self.n = make, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: tuple[int, int]) -> int:
        return item[1]

    def collate(self, keys: list[int]) -> Any:
        return self.make(_generator(keys), len(keys))


def synthetic_shapes(name: str, cfg: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """(image shape, number of classes) of an image task's training examples, from its preset."""
    model, data = cfg.get("model", {}), cfg.get("data", {})
    if name == "cifar10":
        return (3, 32, 32), int(model.get("num_classes", 10))
    if name == "imagenet":
        size = int(data.get("image_size", 224))
        return (3, size, size), int(model.get("num_classes", 1000))
    raise UserError(f"perf --synthetic: {name} is not an image task")


def batch_module(name: str) -> ModuleType:
    """tasks/<name>/synthetic.py (speech, transformer, yolo)."""
    return importlib.import_module(MODULES[name])


class SyntheticData:
    """A task with synthetic training data of the real shapes (perf --synthetic): no data root needed."""

    def __init__(self, task: Any) -> None:
        self._task = task
        if task.needs_data and task.name not in (*IMAGES, *MODULES):
            raise UserError(f"perf --synthetic: no synthetic data for {task.name}; pass --data-root")

    def check_data(self, root: Path, cfg: dict[str, Any]) -> None:
        """Nothing on disk to check."""

    def samples(self, cfg: dict[str, Any], root: Path, split: str) -> None:
        """No files to list (the engine then builds the sets below without a shared list)."""

    def build_model(self, cfg: dict[str, Any]) -> torch.nn.Module:
        if self._task.name in MODULES and hasattr(batch_module(self._task.name), "build_model"):
            return batch_module(self._task.name).build_model(cfg)
        return self._task.build_model(cfg)

    def train_set(self, cfg: dict[str, Any], root: Path) -> Any:
        name = self._task.name
        if not self._task.needs_data:
            return self._task.train_set(cfg, root)
        if name in IMAGES:
            return SyntheticImages(*synthetic_shapes(name, cfg))
        return SyntheticBatches(partial(batch_module(name).synthetic_batch, cfg))

    def eval_set(self, cfg: dict[str, Any], root: Path) -> Any:
        return None if self._task.needs_data else self._task.eval_set(cfg, root)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)

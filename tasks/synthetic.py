"""Random training data of a task's real shapes, for `adascale-bench perf --synthetic`: a task that can
train without its data set returns one of these from `synthetic_set(cfg)` (tasks.base.Task), so the
overhead benchmark can run a paper model on a machine that has none of the data. Nothing is read from
disk, and a micro-batch is a pure function of its first item's key.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

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

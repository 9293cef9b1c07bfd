"""Two models of a user's, for measuring `advise` on models no other doc shows (docs/design.md §4, issue 54): a
small CNN classifying noisy oriented bars in 12×12 images (`Bars`) and a GRU naming the most frequent symbol of a
noisy sequence (`Tally`). Data: .npz files written on first use, read with allow_pickle=False.

    PYTHONPATH=docs/measurements adascale-bench advise --task own_models:Bars --out runs/advise-bars
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from bench.core.errors import UserError
from tasks.base import FloatSum, RunSpec, Task, shard
from tasks.presets import ELASTIC_TINY, EVAL_EXAMPLES, TINY_T1, TINY_WINDOWS, TaskCard

CLASSES, EVAL_BATCH, SIDE, LENGTH, SYMBOLS = 4, 500, 12, 16, 6
FILES = ("train.npz", "eval.npz")


def write_bars(path: Path, n: int, seed: int) -> None:
    """n images: a bar of one of 4 orientations at a random place, Gaussian noise over it, 10 % labels flipped."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    x = rng.normal(0.0, 0.8, (n, 1, SIDE, SIDE)).astype(np.float32)
    r, c = rng.integers(3, SIDE - 3, n), rng.integers(3, SIDE - 3, n)
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}
    for i in range(n):
        dr, dc = steps[int(y[i])]
        for k in range(-3, 4):
            x[i, 0, r[i] + k * dr, c[i] + k * dc] += 1.5
    flip = rng.random(n) < 0.1
    y[flip] = rng.integers(0, CLASSES, int(flip.sum()))
    np.savez(path, x=x, y=y.astype(np.int64))


def write_tally(path: Path, n: int, seed: int) -> None:
    """n sequences of LENGTH symbols: one of the first CLASSES drawn 3× as often as each other; label: that one."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    p = np.ones((n, SYMBOLS))
    p[np.arange(n), y] = 3.0
    p /= p.sum(1, keepdims=True)
    x = np.stack([rng.choice(SYMBOLS, LENGTH, p=row) for row in p]).astype(np.int64)
    np.savez(path, x=x, y=y.astype(np.int64))


class Arrays:
    """x, y arrays; items are (index, key) pairs as the engine picks them; collate stacks the rows."""

    def __init__(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as f:
            self.x, self.y = torch.from_numpy(f["x"]), torch.from_numpy(f["y"])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, item: tuple[int, int]) -> int:
        return item[0]

    def collate(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        i = torch.tensor(indices)
        return self.x[i], self.y[i]


def card(name: str, lr0: float) -> TaskCard:
    common: dict[str, Any] = {
        "batch_size": 16,
        "lr_schedule": {"kind": "exponential", "lr0": lr0, "decay": 0.1},
        "momentum": 0.9,
        "weight_decay": 0.0,
        "num_workers": 0,
        "model": {},
        "data": {},
    }
    tiny = {**common, "T1": TINY_T1, "eval_every": TINY_T1 / 4, "checkpoint_every": TINY_T1 // 4}
    return TaskCard(
        name=name,
        metric="top1",
        metric_label="top-1 %",
        higher_is_better=True,
        needs_data=True,
        presets={
            "tiny": {**tiny, "scales": [1, 2, 4, 8], "elastic": ELASTIC_TINY},
            "paper": {**tiny, "scales": [1, 4, 16, 64], "elastic": {}},
        },
        tiny_windows=TINY_WINDOWS,
        metric_range=(0.0, 100.0),
        margins={"tiny": 1.0, "paper": 0.5},
        max_ranks={"tiny": 1, "paper": 4},
        chance={"tiny": 100.0 / CLASSES, "paper": 100.0 / CLASSES},
    )


class Classifier(Task):
    """What both share: .npz data, cross-entropy, top-1 over fixed evaluation batches."""

    write = staticmethod(write_bars)

    def write_tiny(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        type(self).write(root / "train.npz", 4_000, seed=1)
        type(self).write(root / "eval.npz", 4_000, seed=2)

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        for name in FILES:
            if not (root / name).is_file():
                raise UserError(f"{root}: no {name} (expected {' and '.join(FILES)}, arrays x and y)")

    def train_set(self, cfg: RunSpec, root: Path) -> Arrays:
        return Arrays(root / "train.npz")

    def eval_set(self, cfg: RunSpec, root: Path) -> Arrays:
        return Arrays(root / "eval.npz")

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)

    def eval_stats(self, model, evalset, cfg, device, rank=0, world=1) -> dict[str, Any]:
        starts = range(0, len(evalset), EVAL_BATCH)
        loss, correct, n = FloatSum(), 0, 0
        for b in shard(len(starts), rank, world):
            x, y = evalset.collate(list(range(starts[b], min(starts[b] + EVAL_BATCH, len(evalset)))))
            logits = model(x.to(device))
            loss.append(float(F.cross_entropy(logits.double(), y.to(device), reduction="sum")))
            correct += int((logits.argmax(1) == y.to(device)).sum())
            n += len(y)
        return {"loss_sum": loss, "correct": correct, "n": n}

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        n = max(int(stats["n"]), 1)
        return {"top1": 100.0 * stats["correct"] / n, "loss": stats["loss_sum"] / n, EVAL_EXAMPLES: float(n)}


class Bars(Classifier):
    card = card("bars", 0.05)
    write = staticmethod(write_bars)

    def build_model(self, cfg: RunSpec) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(16, CLASSES),
        )  # fmt: skip


class Recurrent(nn.Module):
    """Embedding → GRU → the last state's logits."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.gru = nn.Embedding(SYMBOLS, 8), nn.GRU(8, 32, batch_first=True)
        self.out = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.gru(self.embed(x))[1][-1])


class Tally(Classifier):
    card = card("tally", 0.05)
    write = staticmethod(write_tally)

    def build_model(self, cfg: RunSpec) -> nn.Module:
        return Recurrent()

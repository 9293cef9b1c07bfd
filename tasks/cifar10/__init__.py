"""cifar10: pre-activation ResNet-18 on CIFAR-10 (docs/design.md §2, first row of the paper's Table 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from bench.core.runspec import RunSpec
from tasks.base import FloatSum, Task, shard
from tasks.presets import EVAL_EXAMPLES
from tasks.presets.cifar10 import CARD
from tasks.synthetic import SyntheticImages

from . import data
from .model import PreActResNet18
from .tiny import TEST_SIZE, TRAIN_SIZE, check_tiny, write_tiny


def top1_and_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[int, float]:
    """(number of correct top-1 predictions, summed cross-entropy) for one batch."""
    correct = int((logits.argmax(dim=1) == labels).sum())
    return correct, float(F.cross_entropy(logits.float(), labels, reduction="sum"))


CPU_SLICE = 100  # images per forward pass on a CPU (see `eval_logits`)


def eval_logits(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The model's logits for one evaluation batch; on a CPU computed CPU_SLICE images at a time.

    An evaluation batch sets what one loss term sums (`eval_batch_size`, part of a run's identity); on one CPU
    core the tiny net's forward over 500 images is ~1.6 × slower than over five slices of 100 (0.69 against
    0.43 s per 1 000 images: the activations of 100 stay in cache), and each image's logits are the same bit
    for bit (tests/tasks/test_task_cifar10.py), so the slices change the cost, not a metric. On an
    accelerator the batch is one pass."""
    if images.device.type != "cpu" or len(images) <= CPU_SLICE:
        return model(images)
    return torch.cat([model(images[j : j + CPU_SLICE]) for j in range(0, len(images), CPU_SLICE)])


class Cifar10(Task):
    """ResNet-18 v2 on the `cifar-10-batches-py` pickles, in torchvision's CIFAR10 layout, read by safepickle."""

    card = CARD

    def write_tiny(
        self, root: Path, tiny_noise: float = 1.0, tiny_test_size: int = TEST_SIZE, tiny_train_size: int = TRAIN_SIZE
    ) -> None:
        write_tiny(root, tiny_noise, tiny_test_size, tiny_train_size)

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        data.check_files(Path(root), bool(cfg.data.get("verify_md5", False)))
        check_tiny(Path(root), cfg.data)

    def synthetic_set(self, cfg: RunSpec) -> SyntheticImages:
        """perf --synthetic: random 32 × 32 images and labels."""
        return SyntheticImages((3, 32, 32), int(cfg.model.get("num_classes", 10)))

    def check_paper_data(self, root: Path, cfg: RunSpec) -> list[str]:
        return data.paper_problems(Path(root))

    def build_model(self, cfg: RunSpec) -> nn.Module:
        m = cfg.model
        return PreActResNet18(
            width=int(m["width"]), num_classes=int(m.get("num_classes", 10)), blocks=int(m.get("blocks", 2))
        )

    def train_set(self, cfg: RunSpec, root: Path) -> data.TrainSet:
        return data.TrainSet(self._split(cfg, root, train=True))

    def eval_set(self, cfg: RunSpec, root: Path) -> data.EvalSet:
        return data.EvalSet.from_dataset(self._split(cfg, root, train=False))

    def _split(self, cfg: RunSpec, root: Path, train: bool) -> data.CIFAR10Pickles:
        """One split, its labels checked against the model's outputs before anything trains on it."""
        ds = data.load_split(Path(root), train=train, verify_md5=bool(cfg.data.get("verify_md5", False)))
        data.check_model_classes(ds, int(cfg.model.get("num_classes", 10)), Path(root))
        return ds

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels)

    def eval_stats(
        self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device, rank: int = 0, world: int = 1
    ) -> dict[str, Any]:
        """Correct top-1 predictions and summed cross-entropy over this rank's block of eval batches."""
        step = int(cfg.data.get("eval_batch_size", 500))
        starts = range(0, len(evalset), step)
        correct, loss_sum, n = 0, FloatSum(), 0
        for b in shard(len(starts), rank, world):
            i = starts[b]
            images = data.normalize(evalset.images[i : i + step].to(device))
            labels = evalset.labels[i : i + step].to(device)
            c, s = top1_and_loss(eval_logits(model, images), labels)
            correct += c
            loss_sum.append(s)
            n += len(labels)
        return {"correct": correct, "loss_sum": loss_sum, "n": n}

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        """Top-1 accuracy (%) and mean cross-entropy over the whole test split, and its size (the report's chance
        tolerance, reports.rundata.failedseeds)."""
        n = max(int(stats["n"]), 1)
        return {"top1": 100.0 * stats["correct"] / n, "loss": stats["loss_sum"] / n, EVAL_EXAMPLES: float(n)}

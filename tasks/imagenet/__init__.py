"""ImageNet task: ResNet-50 on an ImageFolder `train/` `val/` tree, top-1 % (Table 1 of the paper).

Model. The paper preset is `torchvision.models.resnet50(weights=None)`. torchvision's Bottleneck puts
the stride-2 of a downsampling block in its 3x3 conv ("ResNet v1.5", as in NVIDIA's and Goyal et
al.'s code); the original v1 of He et al. 2015 puts it in the first 1x1 conv, which skips 3/4 of the
input pixels there. v1.5 costs ~4.1 vs ~3.8 GFLOPs per 224x224 image and is typically ~0.5 % top-1
more accurate. We read the paper's "ResNet-50 v1" as "not the pre-activation v2" (the distinction
its cifar10 row draws) and keep torchvision's model; `model.stride_in_1x1 = true` moves the strides
to the 1x1 convs after construction, giving exactly v1 with the same parameters.

Zero-init of the last BN gamma in each residual block: on (`zero_init_residual`), as in Goyal et al.
2017 §5.1, whose large-batch recipe LSW is, and whose lr0 = 0.1·b/256 we use; each block then starts
as an identity, which helps the early, large-lr phase of large-batch runs.

The tiny preset uses the same torchvision ResNet/Bottleneck code with [1, 1, 1, 1] blocks and a
`width` knob (stage widths width·(1, 2, 4, 8) instead of 64·(1, 2, 4, 8); the 64-channel stem is
kept), so a micro-batch of 16 32x32 images costs ~20-35 ms CPU forward+backward (one thread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset
from torchvision.models import resnet50
from torchvision.models.resnet import Bottleneck, ResNet

from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks.base import FloatSum, Task, shard
from tasks.presets import EVAL_EXAMPLES
from tasks.presets.imagenet import CARD
from tasks.synthetic import SyntheticImages

from . import tiny
from .data import TrainSet, check_layout, collate, data_settings, eval_folder, folder_samples, paper_problems


class NarrowResNet(ResNet):
    """torchvision's ResNet with stage widths scaled by width/64 (width = 64 is the original)."""

    def __init__(self, layers: list[int], num_classes: int, width: int, **kwargs: Any) -> None:
        if width < 1:
            raise UserError(f"imagenet: model.width must be positive, got {width}")
        self._width = width  # read by _make_layer during ResNet.__init__
        super().__init__(Bottleneck, layers, num_classes=num_classes, **kwargs)
        # ResNet.__init__ sizes fc for width 64; self.inplanes is now the real feature size.
        self.fc = nn.Linear(self.inplanes, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):  # noqa: ANN001, ANN202
        return super()._make_layer(block, planes * self._width // 64, blocks, stride, dilate)


def stride_in_1x1(model: nn.Module) -> nn.Module:
    """Turn v1.5 into v1: move each Bottleneck's stride from its 3x3 conv to its first 1x1 conv.
    Output sizes are unchanged (1x1/s2 and 3x3/s2 with padding 1 both give ceil(n/2))."""
    for block in model.modules():
        if isinstance(block, Bottleneck) and block.conv2.stride != (1, 1):
            block.conv1.stride, block.conv2.stride = block.conv2.stride, (1, 1)
    return model


def build_resnet(model_cfg: dict[str, Any]) -> nn.Module:
    arch = model_cfg.get("arch", "resnet50")
    num_classes = int(model_cfg.get("num_classes", 1000))
    zero_init = bool(model_cfg.get("zero_init_residual", True))
    if arch == "resnet50":
        model: nn.Module = resnet50(weights=None, num_classes=num_classes, zero_init_residual=zero_init)
    elif arch == "resnet":
        layers = [int(n) for n in model_cfg.get("layers", [3, 4, 6, 3])]
        if len(layers) != 4:
            raise UserError(f"imagenet: model.layers must list 4 stage depths, got {layers}")
        width = int(model_cfg.get("width", 64))
        model = NarrowResNet(layers, num_classes, width, zero_init_residual=zero_init)
    else:
        raise UserError(f"imagenet: unknown model.arch {arch!r}; expected 'resnet50' or 'resnet'")
    if model_cfg.get("stride_in_1x1", False):
        stride_in_1x1(model)
    return model


def topk_correct(logits: torch.Tensor, labels: torch.Tensor, ks: tuple[int, ...] = (1, 5)) -> list[int]:
    """Number of examples whose label is among the k highest logits, for each k. With fewer than k
    classes, k is clipped to the number of classes (so top-5 of a 5-class problem is 100 %)."""
    kmax = min(max(ks), logits.shape[1])
    top = logits.topk(kmax, dim=1).indices  # (n, kmax), best first
    hits = top.eq(labels.view(-1, 1))
    return [int(hits[:, : min(k, kmax)].any(dim=1).sum()) for k in ks]


class ImageNet(Task):
    card = CARD

    def write_tiny(self, root: Path) -> None:
        tiny.write_tiny(Path(root))

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        data = data_settings(cfg)
        classes = check_layout(Path(root), data["train_dir"], data["val_dir"])
        expected = int(cfg.model.get("num_classes", 1000))
        if len(classes) != expected:
            raise UserError(
                f"imagenet: {Path(root) / data['train_dir']} has {len(classes)} class folders but the model "
                f"has {expected} outputs; pass --set model.num_classes={len(classes)} or fix the data"
            )

    def synthetic_set(self, cfg: RunSpec) -> SyntheticImages:
        """perf --synthetic: random images of the preset's size and labels."""
        size = int(cfg.data.get("image_size", 224))
        return SyntheticImages((3, size, size), int(cfg.model.get("num_classes", 1000)))

    def check_paper_data(self, root: Path, cfg: RunSpec) -> list[str]:
        return paper_problems(Path(root), cfg)

    def build_model(self, cfg: RunSpec) -> nn.Module:
        return build_resnet(cfg.model)

    def samples(self, cfg: RunSpec, root: Path, split: str) -> list[tuple[str, int]]:
        """(path relative to the split folder, class index) of every image: index.csv's rows, else a walk."""
        data = data_settings(cfg)
        return folder_samples(Path(root) / data["train_dir" if split == "train" else "val_dir"])

    def train_set(self, cfg: RunSpec, root: Path, samples: list[tuple[str, int]] | None = None) -> TrainSet:
        data = data_settings(cfg)
        return TrainSet(Path(root) / data["train_dir"], int(data["image_size"]), data["crop_scale"], samples)

    def eval_set(self, cfg: RunSpec, root: Path, samples: list[tuple[str, int]] | None = None) -> Any:
        data = data_settings(cfg)
        return eval_folder(Path(root) / data["val_dir"], int(data["image_size"]), samples)

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(model(images), labels)

    def eval_stats(
        self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device, rank: int = 0, world: int = 1
    ) -> dict[str, Any]:
        """Top-1/top-5 hits and summed cross-entropy over this rank's block of validation batches."""
        data = data_settings(cfg)
        device = torch.device(device)
        workers = int(cfg.num_workers)
        step = int(data["eval_batch_size"])
        mine = shard(-(-len(evalset) // step), rank, world)  # batches [start, stop) of ceil(n / step)
        part = Subset(evalset, range(mine.start * step, min(mine.stop * step, len(evalset))))
        loader = DataLoader(
            part,
            batch_size=step,
            shuffle=False,
            num_workers=workers,
            collate_fn=collate,
            pin_memory=bool(data["pin_memory"]) and device.type == "cuda",
        )
        n = correct1 = correct5 = 0
        loss_sum = FloatSum()
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            logits = model(images).float()
            loss_sum.append(float(F.cross_entropy(logits, labels, reduction="sum")))
            c1, c5 = topk_correct(logits, labels, (1, 5))
            correct1 += c1
            correct5 += c5
            n += labels.numel()
        return {"correct1": correct1, "correct5": correct5, "loss_sum": loss_sum, "n": n}

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        n = int(stats["n"])
        if n == 0:
            raise UserError(f"imagenet: no validation images in {data_settings(cfg)['val_dir']}")
        return {
            "top1": 100.0 * stats["correct1"] / n,
            "top5": 100.0 * stats["correct5"] / n,
            "loss": stats["loss_sum"] / n,
            EVAL_EXAMPLES: float(n),  # the report's chance tolerance (reports.rundata.failedseeds)
        }

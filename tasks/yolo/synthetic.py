"""Random training batches of yolo's real shapes, for `adascale-bench perf --synthetic` (no VOC).

A batch is what `data.YoloTrainSet.collate` returns for b training images (ultralytics'
`YOLODataset.collate_fn` plus the padded targets the task's loss reads, tasks.yolo.loss): `img` uint8
(b, 3, imgsz, imgsz) at the preset's image size (uniform noise), and every box as one row of `batch_idx`
(its image, float), `cls` (b·k, 1) float below the preset's nc and `bboxes` (b·k, 4) normalised centre-x,
centre-y, width, height, plus the per-image `im_file`, `ori_shape`, `resized_shape` and `ratio_pad`
tuples the real collate carries, and `targets` / `target_mask` (tasks.yolo.loss.pad_targets). Each image
has 1 to 4 boxes (VOC averages about 2.4 objects an image), of sides 10 % to 50 % of the image, inside it.
"""

from __future__ import annotations

from typing import Any

import torch

from bench.core.runspec import RunSpec

from .loss import with_padded_targets

BOXES = (1, 4)  # boxes per image, both ends included
SIDES = (0.1, 0.5)  # box width and height, as fractions of the image


def synthetic_batch(cfg: RunSpec, generator: torch.Generator, items: int | None = None) -> dict[str, Any]:
    """The collated batch of `items` images (default batch_size, one micro-batch)."""
    n = items or int(cfg.batch_size)
    size, nc = int(cfg.data["imgsz"]), int(cfg.model["nc"])
    img = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=generator)
    counts = torch.randint(BOXES[0], BOXES[1] + 1, (n,), generator=generator)
    k = int(counts.sum())
    wh = SIDES[0] + (SIDES[1] - SIDES[0]) * torch.rand(k, 2, generator=generator)
    xy = wh / 2 + (1 - wh) * torch.rand(k, 2, generator=generator)
    batch = {
        "batch_idx": torch.repeat_interleave(torch.arange(n), counts).float(),
        "bboxes": torch.cat([xy, wh], 1),
        "cls": torch.randint(0, nc, (k, 1), generator=generator).float(),
        "im_file": tuple(f"synthetic_{i:04d}.jpg" for i in range(n)),
        "img": img,
        "ori_shape": ((size, size),) * n,
        "ratio_pad": ((1.0, 1.0),) * n,
        "resized_shape": ((size, size),) * n,
    }
    return with_padded_targets(batch)

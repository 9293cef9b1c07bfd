"""The YOLOv8 detection loss without host synchronisations: ultralytics' `v8DetectionLoss` (8.4), same maths.

Why: ultralytics' loss reads data-dependent values on the host every micro-batch (issue 24): `unique` and
`counts.max()` to size its padded targets, `nonzero` to gather the assigner's candidate (gt, anchor) pairs
and the bbox loss's foreground anchors, and `make_anchors` fills its stride tensors from device scalars.
On a GPU each stalls the queue; the engine's budget is one transfer per iteration. Here:

- Targets are padded on the host, in the data pipeline (`pad_targets`, called by the train collate in the
  loader workers, by the synthetic batches and before evaluation moves a batch to the device):
  `targets` (B, M, 5) = class, cx, cy, w, h normalised, rows in the collate's order, zero padding, and
  `target_mask` (B, M) bool. M is the micro-batch's largest box count (as ultralytics' `counts.max()`),
  at least 1 (a row of padding stands for "no boxes", where ultralytics makes M = 0).
- The assigner's candidate pairs are scored densely over all (gt, anchor) pairs and masked with
  `torch.where` (`SyncFreeAssigner.get_box_metrics`); ultralytics scores only the pairs that `nonzero`
  lists and leaves zeros elsewhere: the same tensor, value for value.
- The bbox loss (CIoU and DFL) is computed on every anchor and weighted by the foreground mask instead of
  being gathered at the foreground anchors: the dropped anchors contribute exact zeros (their terms are
  finite, and their weight, the summed target score, is zero), so the sums are ultralytics' sums up to the
  order of float additions; so are the gradients (zero weight times a finite derivative).
- `max(target_scores.sum(), 1)` is `clamp(min=1)` on the device; anchor points and strides are built on
  the device from the strides as Python floats, read once when the loss is built.

What is ultralytics' own, called as is (sync-free, checked by tests/tasks/test_yolo_loss.py and the sync
count): `bbox_iou` (CIoU), `bbox2dist`, `DFLoss`, `xywh2xyxy`/`xyxy2xywh`, and `TaskAlignedAssigner`'s
`_forward` (normalisation of the alignment metric), `select_topk_candidates`, `select_highest_overlaps`
(which in 8.4 already resolves an anchor claimed by several boxes with `torch.where`, unconditionally, not
behind `if fg_mask.max() > 1`) and `get_targets`. Gains come from `model.args` (box 7.5, cls 0.5, dfl 1.5).
Not supported (unused here): ultralytics' `class_weights` and the L1 box loss of heads with reg_max = 1.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from . import offline


def pad_targets(batch_idx: torch.Tensor, cls: torch.Tensor, bboxes: torch.Tensor, images: int):
    """(targets (images, M, 5), mask (images, M)) from ultralytics' collated rows, on the host (CPU tensors:
    the counts are read here, where reading them costs nothing). Rows must be grouped by image, as
    ultralytics' collate_fn leaves them; each image's boxes keep their order (the assigner breaks ties by it)."""
    idx = batch_idx.reshape(-1).long()
    n = idx.numel()
    counts = torch.bincount(idx, minlength=images) if n else torch.zeros(images, dtype=torch.long)
    if n and (bool((idx[1:] < idx[:-1]).any()) or int(idx.max()) >= images or int(idx.min()) < 0):
        raise ValueError("targets: batch_idx must be grouped by image, in 0..images-1")
    m = max(int(counts.max()) if images else 0, 1)
    starts = torch.cumsum(counts, 0) - counts
    within = torch.arange(n) - starts[idx]
    targets = torch.zeros(images, m, 5, dtype=torch.float32)
    mask = torch.zeros(images, m, dtype=torch.bool)
    targets[idx, within] = torch.cat((cls.reshape(-1, 1), bboxes.reshape(-1, 4)), 1).float()
    mask[idx, within] = True
    return targets, mask


def with_padded_targets(batch: dict[str, Any]) -> dict[str, Any]:
    """The collated batch plus its `targets` and `target_mask` (see pad_targets)."""
    targets, mask = pad_targets(batch["batch_idx"], batch["cls"], batch["bboxes"], batch["img"].shape[0])
    return {**batch, "targets": targets, "target_mask": mask}


@functools.cache
def _assigner_class() -> type:
    offline.ensure()
    from ultralytics.utils.ops import xywh2xyxy, xyxy2xywh
    from ultralytics.utils.tal import TaskAlignedAssigner

    class SyncFreeAssigner(TaskAlignedAssigner):
        """ultralytics' task-aligned assigner, with its two methods that sync replaced by masked ones."""

        def select_candidates_in_gts(self, xy_centers, gt_bboxes, mask_gt, eps=1e-9):
            """Anchors whose centre lies inside a gt box, valid boxes' sides under stride_val widened to it
            about their centre: ultralytics' test, with the floor as a Python scalar (ultralytics builds a
            tensor from it on the device, a blocking host-to-device copy on a GPU)."""
            xywh = xyxy2xywh(gt_bboxes)
            small = (xywh[..., 2:] < self.stride_val) & mask_gt.bool()
            xywh[..., 2:] = torch.where(small, float(self.stride_val), xywh[..., 2:])
            lt, rb = xywh2xyxy(xywh).unsqueeze(2).chunk(2, 3)  # (b, n_boxes, 1, 2)
            mask = xy_centers[:, 0] - lt[..., 0] > eps
            mask &= xy_centers[:, 1] - lt[..., 1] > eps
            mask &= rb[..., 0] - xy_centers[:, 0] > eps
            mask &= rb[..., 1] - xy_centers[:, 1] > eps
            return mask

        def get_box_metrics(self, pd_scores, pd_bboxes, gt_labels, gt_bboxes, mask_gt, **extra):
            """(align_metric, overlaps), each (b, n_boxes, anchors): score^alpha * CIoU^beta and the CIoU
            (clamped at 0) of each candidate pair, 0 elsewhere. Ultralytics lists the candidates with
            `nonzero` and scatters their values into zeros; here every pair is scored (the same elementwise
            arithmetic) and the non-candidates are zeroed by `torch.where`, so both tensors are the same."""
            if extra:
                raise TypeError(f"SyncFreeAssigner: unexpected {sorted(extra)}")
            mask = mask_gt.bool()
            labels = gt_labels.long().squeeze(-1)  # (b, n_boxes); padding rows read class 0, then masked
            scores = pd_scores.gather(2, labels.unsqueeze(1).expand(-1, pd_scores.shape[1], -1)).transpose(1, 2)
            overlaps = self.iou_calculation(gt_bboxes.unsqueeze(2), pd_bboxes.unsqueeze(1))  # (b, n_boxes, anchors)
            align = scores.pow(self.alpha) * overlaps.pow(self.beta)
            return torch.where(mask, align, 0.0), torch.where(mask, overlaps, 0.0)

    return SyncFreeAssigner


def criterion(model: Any) -> DetectionLoss:
    """The model's DetectionLoss (built with it by `Yolo.build_model`; built here for a model made another way,
    which reads its strides once). `model` may be wrapped (DDP's `.module`)."""
    net = getattr(model, "module", model)
    loss = getattr(net, "detection_loss", None)
    if loss is None:
        loss = net.detection_loss = DetectionLoss(net)
    return loss


class DetectionLoss:
    """ultralytics' v8DetectionLoss for `model` (a DetectionModel), sync-free. Built once, on the host
    (reads the head's strides); holds no tensors, so it follows the predictions to any device."""

    def __init__(self, model: nn.Module, tal_topk: int = 10) -> None:
        offline.ensure()
        from ultralytics.utils.loss import DFLoss

        head = model.model[-1]
        self.nc, self.reg_max = int(head.nc), int(head.reg_max)
        if self.reg_max <= 1:
            raise ValueError("DetectionLoss: heads with reg_max 1 (L1 box loss) are not supported")
        self.strides = [float(s) for s in head.stride.tolist()]  # once, at build time
        self.gains = (float(model.args.box), float(model.args.cls), float(model.args.dfl))
        # As v8DetectionLoss builds it: top-10, alpha 0.5, beta 6.
        self.assigner = _assigner_class()(topk=tal_topk, num_classes=self.nc, alpha=0.5, beta=6.0, stride=self.strides)
        self.dfl = DFLoss(self.reg_max)

    def anchors(self, feats: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(anchor points (A, 2) in grid units, cell centres; strides (A, 1)): ultralytics' make_anchors,
        made on the device directly (make_anchors builds them on the host and fills strides from a tensor)."""
        points, strides = [], []
        ref = feats[0]
        for f, s in zip(feats, self.strides, strict=True):
            h, w = f.shape[2:]
            sx = torch.arange(w, device=ref.device, dtype=ref.dtype) + 0.5
            sy = torch.arange(h, device=ref.device, dtype=ref.dtype) + 0.5
            sy, sx = torch.meshgrid(sy, sx, indexing="ij")
            points.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), s, device=ref.device, dtype=ref.dtype))
        return torch.cat(points), torch.cat(strides)

    def __call__(self, preds: Any, targets: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
        """The vector [box, cls, dfl], gains applied, each normalised by the summed target scores (at least
        1): ultralytics' `loss` divided by the batch size, i.e. its logged loss items."""
        from ultralytics.utils.metrics import bbox_iou
        from ultralytics.utils.ops import xywh2xyxy
        from ultralytics.utils.tal import bbox2dist, dist2bbox

        preds = preds[1] if isinstance(preds, tuple) else preds  # eval mode: (decoded, raw)
        pred_distri = preds["boxes"].permute(0, 2, 1).contiguous()  # (b, A, 4 reg_max)
        pred_scores = preds["scores"].permute(0, 2, 1).contiguous()  # (b, A, nc)
        dtype, (b, a, _) = pred_scores.dtype, pred_scores.shape
        anchor_points, stride_tensor = self.anchors(preds["feats"])
        h, w = (n * self.strides[0] for n in preds["feats"][0].shape[2:])  # image size in pixels

        # Targets: class and pixel xyxy boxes; padding rows are zeros, as in ultralytics' preprocess.
        targets = targets.to(pred_scores.device, torch.float32)
        gt_labels = targets[..., :1]
        xywh = targets[..., 1:5].clone()
        xywh[..., 0::2] *= w
        xywh[..., 1::2] *= h
        gt_bboxes = xywh2xyxy(xywh)
        # ultralytics' validity test is `xyxy.sum() > 0` (its padding is zeros); padding here is also masked
        mask_gt = (gt_bboxes.sum(2, keepdim=True) > 0) & target_mask.to(gt_bboxes.device).unsqueeze(-1)

        # Predicted boxes: the expectation of each side's distribution, decoded to xyxy (grid units)
        proj = torch.arange(self.reg_max, device=pred_distri.device, dtype=dtype)
        dist = pred_distri.view(b, a, 4, self.reg_max).softmax(3).matmul(proj)
        pred_bboxes = dist2bbox(dist, anchor_points, xywh=False)

        _, target_bboxes, target_scores, fg_mask, _ = self.assigner(
            pred_scores.detach().sigmoid(),
            (pred_bboxes.detach() * stride_tensor).type(gt_bboxes.dtype),
            anchor_points * stride_tensor,
            gt_labels,
            gt_bboxes,
            mask_gt,
        )
        target_scores_sum = target_scores.sum().clamp(min=1)  # max(sum, 1) on the device

        cls = F.binary_cross_entropy_with_logits(pred_scores, target_scores.to(dtype), reduction="none").sum()

        # Box losses over every anchor, weighted by the foreground: ultralytics gathers fg anchors instead.
        weight = torch.where(fg_mask, target_scores.sum(-1), 0.0)  # (b, A); 0 off the foreground anyway
        target_bboxes = target_bboxes / stride_tensor
        iou = bbox_iou(pred_bboxes, target_bboxes, xywh=False, CIoU=True).squeeze(-1)  # (b, A)
        box = (torch.where(fg_mask, 1.0 - iou, 0.0) * weight).sum()
        target_ltrb = bbox2dist(anchor_points, target_bboxes, self.reg_max - 1)
        dfl = self.dfl(pred_distri.view(-1, self.reg_max), target_ltrb.view(-1, 4)).view(b, a)
        dfl = (torch.where(fg_mask, dfl, 0.0) * weight).sum()

        # ultralytics' order: each term over the score sum, then times its gain
        terms = (box, cls, dfl)
        return torch.stack([(t / target_scores_sum).float() * g for t, g in zip(terms, self.gains, strict=True)])

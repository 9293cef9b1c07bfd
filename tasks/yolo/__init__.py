"""YOLOv3 on PASCAL VOC through ultralytics' model, loss, dataset and mAP, driven by the suite's engine.

Model: ultralytics' `DetectionModel` built from its `yolov3.yaml` (paper preset: Darknet-53 backbone,
FPN-style head, outputs at strides 8/16/32) or `yolov3-tiny.yaml` (tiny preset, outputs at strides
16/32, with two of the yaml's own keys changed: `width_multiple` 0.25, giving 0.9 M parameters, and
`reg_max` 4 instead of 16: the DFL head starts out predicting boxes of about reg_max x stride per
side, sized for 640-px images; at 64 px they would have near-zero IoU with every object, the
task-aligned targets would be ~0 and the untrained model collapses to predicting nothing). `nc` comes
from the preset and is checked against the dataset YAML (build_model sees no data root). Never built
from weights: nothing is downloaded.

How this YOLOv3 differs from Redmon & Farhadi's (2018): ultralytics keeps the YOLOv3 backbone and
neck but replaces the head and the loss with its v8 ones. Darknet's YOLOv3 is anchor-based (9 k-means
anchor boxes, 3 per scale at 3 scales), predicts an objectness score plus independent per-class
sigmoids per anchor, assigns each ground truth to the single best-IoU anchor, and trains with the
Darknet loss (squared error on box offsets, BCE on objectness and classes, ignore threshold 0.5).
Here the head is anchor-free and decoupled (separate box and class branches per scale, one
prediction per grid cell), boxes are distances to the four sides regressed as discrete
distributions (DFL, reg_max = 16), there is no objectness (class scores carry confidence), targets
are assigned by the task-aligned assigner (top-10 cells by score^0.5 * IoU^6 inside each box), and
the loss is CIoU box loss + BCE class loss + DFL with ultralytics' default gains box 7.5, cls 0.5,
dfl 1.5 (`get_cfg()`, set as `model.args` exactly as ultralytics' trainer does). So absolute
numbers are not those of the paper's network; the AdaScale comparison across scales is what counts.

Loss: ultralytics' v8 detection loss (v8DetectionLoss with its TaskAlignedAssigner, CIoU and DFL, gains
from `model.args`), reimplemented without host synchronisations in tasks/yolo/loss.py (issue 24).
ultralytics' own reads box counts on the host and indexes by boolean masks: 6 host syncs per micro-batch
on the tiny preset's two-scale head, 7 on the paper's three. Ours pads the targets on the host in the
collate (`targets`, `target_mask`), masks instead of indexing, and equals ultralytics' to float rounding
(tests/tasks/test_yolo_loss.py). `model(img)` (the wrapper's forward, so DDP works) gives the head's raw
outputs; the loss is box + cls + dfl as ultralytics logs it, each term normalised over the micro-batch's
summed target scores (at least 1), i.e. ultralytics' `loss.sum() / b`: the micro-batch mean the engine
expects.

Evaluation: ultralytics' `DetectionValidator` used programmatically, without a trainer and without
its `__call__`: its `preprocess`, `postprocess` (ultralytics' NMS: conf 0.001, IoU 0.7, max_det 300,
multi-label), `update_metrics` (box_iou against the letterboxed ground truth and the validator's greedy
`match_predictions` at IoU 0.50:0.05:0.95) and `get_stats` (DetMetrics / ap_per_class, 101-point
interpolated AP), on ultralytics' val-mode dataset (letterbox, rectangular batches). Building the
validator imports torchvision (a few seconds once per process on 2 CPU cores); that also gives NMS
torchvision's kernel instead of ultralytics' python-loop fallback, which is slower even on the tiny
set and far slower on VOC. Reported in percent: `map50` (the Table 2 metric), `map50_95`, plus the
validation `loss`: the training loss (tasks/yolo/loss.py, the same function and convention) on eval-mode
outputs, averaged over images.

Deviations from ultralytics' trainer, on purpose (the engine owns the optimisation): no warm-up, no
EMA of weights, no `close_mosaic`, no nominal-batch (64) accumulation or weight-decay rescaling, a
single parameter group (weight decay also on BN and biases), fp32 (no AMP, hence no AMP check).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from bench.core.runspec import RunSpec
from tasks.base import Concat, FloatSum, Task, combine, shard
from tasks.presets.yolo import CARD
from tasks.synthetic import SyntheticBatches, synthetic_module

from . import offline
from .data import YoloEvalSet, YoloTrainSet, build_dataset, read_spec
from .loss import DetectionLoss, criterion, with_padded_targets
from .tiny import write_tiny as _write_tiny


class Yolo(Task):
    card = CARD

    def write_tiny(self, root: Path) -> None:
        _write_tiny(Path(root))

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        read_spec(Path(root), cfg.data["yaml"], nc=int(cfg.model["nc"]))

    def synthetic_set(self, cfg: RunSpec) -> SyntheticBatches:
        """perf --synthetic: batches of the preset's shapes (tasks/yolo/synthetic.py, loaded when asked)."""
        return SyntheticBatches(partial(synthetic_module(__name__).synthetic_batch, cfg))

    def build_model(self, cfg: RunSpec) -> nn.Module:
        offline.ensure()
        from ultralytics.cfg import get_cfg
        from ultralytics.nn.tasks import DetectionModel, yaml_model_load

        m = cfg.model
        arch = yaml_model_load(m["yaml"])  # ultralytics' packaged cfg/models/v3/*.yaml
        arch["width_multiple"] = float(m.get("width_multiple", 1.0))
        arch["depth_multiple"] = float(m.get("depth_multiple", 1.0))
        arch["reg_max"] = int(m.get("reg_max", 16))
        model = DetectionModel(arch, ch=3, nc=int(m["nc"]), verbose=False)
        model.args = get_cfg()  # the loss reads its gains (box, cls, dfl) here, as under ultralytics' trainer
        model.detection_loss = DetectionLoss(model)  # reads the strides now, on the host, not per step
        return model

    def train_set(self, cfg: RunSpec, root: Path) -> YoloTrainSet:
        spec = read_spec(Path(root), cfg.data["yaml"], nc=int(cfg.model["nc"]))
        return YoloTrainSet(build_dataset(spec, cfg.data, "train", int(cfg.batch_size)))

    def eval_set(self, cfg: RunSpec, root: Path) -> YoloEvalSet:
        spec = read_spec(Path(root), cfg.data["yaml"], nc=int(cfg.model["nc"]))
        b = int(cfg.data.get("eval_batch_size", 32))
        return YoloEvalSet(build_dataset(spec, cfg.data, "val", b), spec, b)

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """box + cls + dfl of the micro-batch (tasks/yolo/loss.py): no host sync. The batch carries its padded
        targets (the collate adds them); one without (ultralytics' collate only) is padded here if it is
        still on the host, and refused on a device, where padding would read the box counts back."""
        if "targets" not in batch:
            if batch["batch_idx"].device.type != "cpu":
                raise ValueError("yolo loss: batch without 'targets'/'target_mask'; collate with YoloTrainSet.collate")
            batch = with_padded_targets(batch)
        preds = model(batch["img"].float() / 255)  # training mode: the head's raw outputs
        return criterion(model)(preds, batch["targets"], batch["target_mask"]).sum()

    def eval_stats(
        self,
        model: nn.Module,
        evalset: YoloEvalSet,
        cfg: RunSpec,
        device: torch.device,
        rank: int = 0,
        world: int = 1,
    ) -> dict[str, Any]:
        """This rank's block of validation batches: the summed loss, the image count, and every image's
        matched detections (mAP is no sum of per-shard numbers: the images' records are concatenated
        on rank 0 in order and mAP is computed there, as one process computes it)."""
        return map_statistics(model, evalset, device, rank, world)

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        return map_from_statistics(stats, int(cfg.model["nc"]))


def make_validator(evalset: YoloEvalSet, device: torch.device, loader: Any = None):
    """ultralytics' DetectionValidator, set up for use without a trainer and without its __call__
    (which would deep-copy and fuse the model, and look for a dataset YAML to check and download)."""
    offline.ensure()
    from ultralytics.models.yolo.detect import DetectionValidator

    args = {
        "task": "detect",
        "mode": "val",
        "plots": False,  # no plots, hence no font download
        "save_json": False,
        "save_txt": False,
        "verbose": False,
        "imgsz": evalset.dataset.imgsz,
        "batch": evalset.batch_size,
    }  # conf (0.001 for val), iou 0.7 and max_det 300 stay ultralytics' defaults
    # The validator mkdirs save_dir; with plots and saving off nothing is written into it.
    validator = DetectionValidator(dataloader=loader or evalset.loader(), save_dir=offline.home() / "val", args=args)
    validator.data = evalset.spec.as_ultralytics()
    validator.device = device
    validator.training = False
    validator.init_metrics(SimpleNamespace(names=dict(evalset.spec.names), end2end=False))  # reads only these
    return validator


_STATS = ("tp", "conf", "pred_cls", "target_cls", "target_img")


def map_statistics(
    model: Any, evalset: YoloEvalSet, device: torch.device, rank: int = 0, world: int = 1
) -> dict[str, Any]:
    """The body of DetectionValidator.__call__'s loop (minus its timing, callbacks and plots) over this
    rank's block of validation batches: the same batches as in one process (rect mode gives each batch
    its letterbox shape), so each image's records are the same."""
    n_images, b = len(evalset.dataset), evalset.batch_size
    batches = [list(range(i * b, min((i + 1) * b, n_images))) for i in shard(-(-n_images // b), rank, world)]
    loader = torch.utils.data.DataLoader(evalset.dataset, batch_sampler=batches, collate_fn=evalset.dataset.collate_fn)
    validator = make_validator(evalset, device, loader)
    loss_sum, n = FloatSum(), 0
    for batch in loader:
        batch = validator.preprocess(with_padded_targets(batch))  # to the device, uint8 -> float / 255
        preds = model(batch["img"])  # eval mode: (decoded xywh boxes + class scores, raw head outputs)
        loss = criterion(model)(preds, batch["targets"], batch["target_mask"])  # the training loss, per image
        loss_sum.append(float(loss.sum()) * batch["img"].shape[0])
        n += batch["img"].shape[0]
        validator.update_metrics(validator.postprocess(preds), batch)
    records = validator.metrics.stats
    per_image = Concat(tuple(records[k][i] for k in _STATS) for i in range(len(records["tp"])))
    return {"loss_sum": loss_sum, "images": n, "per_image": per_image}


def map_from_statistics(stats: dict[str, Any], nc: int) -> dict[str, float]:
    """mAP@0.5 and mAP@0.5:0.95 in percent (ultralytics' DetMetrics over every image's records, in
    order), and the validation loss."""
    offline.ensure()
    from ultralytics.utils.metrics import DetMetrics

    metrics = DetMetrics(names={i: str(i) for i in range(nc)})
    for record in stats["per_image"]:
        for k, v in zip(_STATS, record, strict=True):
            metrics.stats[k].append(v)
    if stats["per_image"]:
        metrics.process(save_dir=offline.home() / "val", plot=False)
    results = metrics.results_dict
    return {
        "map50": 100.0 * float(results["metrics/mAP50(B)"]),
        "map50_95": 100.0 * float(results["metrics/mAP50-95(B)"]),
        "loss": stats["loss_sum"] / max(int(stats["images"]), 1),
    }


def evaluate_map(model: Any, evalset: YoloEvalSet, device: torch.device) -> dict[str, float]:
    """mAP@0.5 and mAP@0.5:0.95 in percent, plus the validation loss, over the whole validation set (one
    shard, combined as the engine combines every rank's)."""
    return map_from_statistics(combine([map_statistics(model, evalset, device)]), len(evalset.spec.names))

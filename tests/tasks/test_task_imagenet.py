"""The imagenet task: tiny ImageFolder writer, layout checks, transforms, accuracy, presets, models."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn
from torchvision.datasets import ImageFolder
from torchvision.models.resnet import Bottleneck

from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks import get_task
from tasks.imagenet import ImageNet, build_resnet, topk_correct
from tasks.imagenet import tiny as tiny_mod
from tasks.imagenet.data import check_layout
from tests.helpers import preset_spec, tiny_spec


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet_tiny")
    ImageNet().write_tiny(root)
    return root


def tiny_cfg(seed: int = 0, **changes: Any) -> RunSpec:
    return tiny_spec("imagenet", seed, **changes)


# --- the tiny dataset, read by torchvision's own ImageFolder -----------------------------------------


def test_tiny_set_is_an_imagefolder_of_jpegs(tiny_root: Path) -> None:
    train = ImageFolder(str(tiny_root / "train"))
    val = ImageFolder(str(tiny_root / "val"))
    assert train.classes == sorted(tiny_mod.CLASSES) == val.classes
    assert len(train) == len(tiny_mod.CLASSES) * tiny_mod.TRAIN_PER_CLASS
    assert len(val) == len(tiny_mod.CLASSES) * tiny_mod.VAL_PER_CLASS
    assert np.bincount(train.targets).tolist() == [tiny_mod.TRAIN_PER_CLASS] * len(tiny_mod.CLASSES)
    assert np.bincount(val.targets).tolist() == [tiny_mod.VAL_PER_CLASS] * len(tiny_mod.CLASSES)
    path, _ = train.samples[0]
    with Image.open(path) as im:
        assert im.format == "JPEG" and im.mode == "RGB"
        assert im.size == (tiny_mod.IMAGE_SIZE, tiny_mod.IMAGE_SIZE)


def test_tiny_writer_is_deterministic(tiny_root: Path, tmp_path: Path) -> None:
    tiny_mod.write_tiny(tmp_path)
    for rel in ("train/disk/disk_0000.JPEG", "val/vstripes/vstripes_0019.JPEG"):
        assert (tmp_path / rel).read_bytes() == (tiny_root / rel).read_bytes()


def test_tiny_classes_differ_in_pixels(tiny_root: Path) -> None:
    """Class-dependent structure: class mean colours are far apart relative to their spread."""
    val = ImageFolder(str(tiny_root / "val"))
    means = {}
    for path, label in val.samples:
        with Image.open(path) as im:
            means.setdefault(label, []).append(np.asarray(im, dtype=np.float64).mean(axis=(0, 1)))
    centres = np.array([np.mean(v, axis=0) for v in means.values()])
    gaps = [np.linalg.norm(a - b) for i, a in enumerate(centres) for b in centres[i + 1 :]]
    assert min(gaps) > 10.0


# --- layout checks -----------------------------------------------------------------------------------


def _jpeg(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (120, 30, 30)).save(path, format="JPEG")


def _layout(root: Path, train: dict[str, int], val: dict[str, int]) -> Path:
    for split, classes in (("train", train), ("val", val)):
        for name, count in classes.items():
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                _jpeg(root / split / name / f"{i}.JPEG")
    return root


def _error(root: Path, cfg: RunSpec | None = None) -> str:
    cfg = cfg or tiny_cfg(model={"num_classes": 2})
    with pytest.raises(UserError) as info:
        ImageNet().check_data(root, cfg)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_good_layout_passes(tmp_path: Path, tiny_root: Path) -> None:
    root = _layout(tmp_path, {"a": 2, "b": 1}, {"a": 1, "b": 1})
    assert check_layout(root) == ["a", "b"]
    ImageNet().check_data(tiny_root, tiny_cfg())


def test_missing_root(tmp_path: Path) -> None:
    message = _error(tmp_path / "nowhere")
    assert "nowhere" in message and "does not exist" in message


@pytest.mark.parametrize("split", ["train", "val"])
def test_missing_split(tmp_path: Path, split: str) -> None:
    root = _layout(tmp_path, {"a": 1, "b": 1}, {"a": 1, "b": 1})
    shutil.rmtree(root / split)
    message = _error(root)
    assert "missing split folder" in message and str(root / split) in message


def test_split_without_images(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"a": 1, "b": 1}, {"a": 0, "b": 0})
    (root / "val" / "a" / "notes.txt").write_text("not an image")
    message = _error(root)
    assert "has no images" in message and str(root / "val") in message


def test_split_without_class_folders(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"a": 1, "b": 1}, {})
    (root / "val").mkdir()
    assert "has no images" in _error(root)


def test_flat_val_folder(tmp_path: Path) -> None:
    """The official ImageNet val archive unpacks flat: say so, rather than 'no class folders'."""
    root = _layout(tmp_path, {"a": 1, "b": 1}, {})
    _jpeg(root / "val" / "ILSVRC2012_val_00000001.JPEG")
    message = _error(root)
    assert "no class folders" in message and str(root / "val") in message


def test_empty_class_folder(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"a": 1, "b": 0}, {"a": 1, "b": 1})
    message = _error(root)
    assert "class folders with no images" in message and "b" in message.split("train:")[-1]


def test_classes_differ_between_splits(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"a": 1, "b": 1, "cat": 1}, {"a": 1, "b": 1, "dog": 1})
    message = _error(root)
    assert "different class folders" in message
    assert "only in train/: cat" in message and "only in val/: dog" in message


def test_class_count_must_match_model(tiny_root: Path) -> None:
    message = _error(tiny_root, preset_spec("imagenet", "paper"))
    assert "model.num_classes=5" in message


# --- items, transforms, collate -----------------------------------------------------------------------


def test_train_items_are_a_function_of_key(tiny_root: Path) -> None:
    task = ImageNet()
    train = task.train_set(tiny_cfg(), tiny_root)
    assert len(train) == 300
    a = train[(3, 1234)]
    torch.manual_seed(99)  # the global RNG must not matter
    train[(5, 7)]
    b = train[(3, 1234)]
    c = train[(3, 1235)]
    assert a[1] == b[1] == train.folder.targets[3]
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    images, labels = train.collate([train[(i, i)] for i in range(4)])
    assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
    assert type(images) is torch.Tensor
    assert labels.dtype == torch.long and labels.shape == (4,)
    # ImageNet-normalised: roughly centred
    assert -3.0 < float(images.mean()) < 3.0


def test_eval_items_are_deterministic(tiny_root: Path) -> None:
    evalset = ImageNet().eval_set(tiny_cfg(), tiny_root)
    x1, y1 = evalset[7]
    x2, _ = evalset[7]
    assert x1.shape == (3, 32, 32) and torch.equal(x1, x2) and y1 == evalset.targets[7]


# --- accuracy -----------------------------------------------------------------------------------------


def _reference_topk(logits: torch.Tensor, labels: torch.Tensor, k: int) -> int:
    """Independent: the label is in the top k iff fewer than k logits beat it (no ties here)."""
    hits = 0
    for row, label in zip(logits.tolist(), labels.tolist(), strict=True):
        better = sum(v > row[label] for v in row)
        hits += better < k
    return hits


@pytest.mark.parametrize("classes", [2, 3, 5, 10, 40])
def test_topk_matches_reference(classes: int) -> None:
    g = torch.Generator().manual_seed(classes)
    logits = torch.randn(200, classes, generator=g)
    labels = torch.randint(0, classes, (200,), generator=g)
    top1, top5 = topk_correct(logits, labels, (1, 5))
    assert top1 == _reference_topk(logits, labels, 1)
    assert top5 == _reference_topk(logits, labels, 5)
    if classes <= 5:
        assert top5 == 200  # fewer than 5 classes: every label is in the top 5
    else:
        assert top1 < top5 < 200


def test_evaluate_on_constant_predictor(tiny_root: Path) -> None:
    """A model that always prefers class 0 scores the share of class 0 in val as top-1."""

    class Constant(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(x.shape[0], 5)
            out[:, 0] = 1.0
            return out

    task = ImageNet()
    cfg = tiny_cfg(data={"eval_batch_size": 7})  # ragged last batch
    result = task.evaluate(Constant(), task.eval_set(cfg, tiny_root), cfg, torch.device("cpu"))
    assert result["top1"] == pytest.approx(20.0)
    assert result["top5"] == pytest.approx(100.0)
    e = math.e
    expected = 0.2 * -math.log(e / (e + 4)) + 0.8 * -math.log(1 / (e + 4))
    assert result["loss"] == pytest.approx(expected, rel=1e-5)


# --- presets ------------------------------------------------------------------------------------------


def _table2() -> Path:
    return Path(__file__).resolve().parents[2] / "reports" / "tables" / "paper_table2.csv"  # the shipped copy


def test_paper_preset_values() -> None:
    p = ImageNet.presets["paper"]
    assert p["batch_size"] == 256 and p["T1"] == 451_000
    assert p["lr_schedule"]["kind"] == "step"
    assert p["lr_schedule"]["lr0"] == 0.1 and p["lr_schedule"]["gamma"] == 0.1
    assert p["lr_schedule"]["milestones"] == pytest.approx([30 / 90, 60 / 90, 80 / 90])
    assert p["momentum"] == 0.9 and p["weight_decay"] == 1e-4
    assert p["scales"] == [1, 16, 32, 64, 128]
    assert p["elastic"] == {"up": [[0.0, 32], [0.25, 64], [0.5, 128]], "down": [[0.0, 128], [0.25, 64], [0.5, 32]]}
    assert p["model"]["num_classes"] == 1000 and p["data"]["image_size"] == 224
    assert p["data"]["pin_memory"] is True and p["num_workers"] >= 4


def test_paper_preset_agrees_with_table2() -> None:
    with _table2().open() as f:
        rows = [r for r in csv.DictReader(f) if r["task"] == "imagenet" and r["scale"] == "1"]
    assert rows
    for row in rows:
        assert int(row["total_batch"]) == ImageNet.presets["paper"]["batch_size"]
        assert int(row["iterations"]) == ImageNet.presets["paper"]["T1"]
    scales = {
        int(r["scale"]) for r in csv.DictReader(_table2().open()) if r["task"] == "imagenet" and r["scale"].isdigit()
    }
    assert scales == set(ImageNet.presets["paper"]["scales"])


@pytest.mark.parametrize("preset", ["paper", "tiny"])
def test_presets_complete(preset: str) -> None:
    p = ImageNet.presets[preset]
    assert isinstance(p["T1"], int) and isinstance(p["checkpoint_every"], int)
    if preset == "tiny":
        assert p["scales"] == [1, 2, 4, 8] and p["num_workers"] == 0
        assert p["eval_every"] == pytest.approx(p["T1"] / 4, rel=0.3)


def test_registry_finds_the_task() -> None:
    task = get_task("imagenet")
    assert isinstance(task, ImageNet) and task.metric == "top1"


# --- models -------------------------------------------------------------------------------------------


def test_paper_model_is_torchvision_resnet50() -> None:
    torch.manual_seed(0)
    model = ImageNet().build_model(preset_spec("imagenet", "paper"))
    assert sum(p.numel() for p in model.parameters()) == 25_557_032  # ResNet-50, 1000 classes
    # zero-init of the last BN gamma per block (Goyal et al.)
    assert all(not m.bn3.weight.detach().any() for m in model.modules() if isinstance(m, Bottleneck))
    model.eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)


def test_width_64_resnet_equals_resnet50() -> None:
    with torch.device("meta"):  # shapes only: no memory, no init cost
        narrow = build_resnet({"arch": "resnet", "layers": [3, 4, 6, 3], "width": 64, "num_classes": 1000})
    assert sum(p.numel() for p in narrow.parameters()) == 25_557_032
    assert narrow.fc.in_features == 2048 and narrow.layer1[0].conv2.out_channels == 64


def test_stride_in_1x1_gives_v1() -> None:
    cfg = {"arch": "resnet", "layers": [1, 1, 1, 1], "width": 8, "num_classes": 5}
    v15 = build_resnet(cfg)
    v1 = build_resnet({**cfg, "stride_in_1x1": True})
    first = v1.layer2[0]
    assert first.conv1.stride == (2, 2) and first.conv2.stride == (1, 1)
    assert v15.layer2[0].conv2.stride == (2, 2)
    x = torch.randn(2, 3, 37, 37)  # odd sizes too
    assert v1(x).shape == v15(x).shape == (2, 5)


def test_tiny_model_shapes() -> None:
    model = ImageNet().build_model(tiny_cfg())
    assert model(torch.randn(16, 3, 32, 32)).shape == (16, 5)
    assert sum(p.numel() for p in model.parameters()) < 1_000_000


def test_sgd_lowers_the_loss_on_the_tiny_set(tiny_root: Path) -> None:
    """Test-only plain SGD on a few micro-batches: the task's loss must fall."""
    task = ImageNet()
    cfg = tiny_cfg()
    torch.manual_seed(0)
    model = task.build_model(cfg)
    train = task.train_set(cfg, tiny_root)
    g = torch.Generator().manual_seed(0)
    batches = [
        train.collate([train[(int(i), int(i))] for i in torch.randperm(len(train), generator=g)[:16]]) for _ in range(2)
    ]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def total() -> float:
        with torch.no_grad():
            return sum(float(task.loss(model, b)) for b in batches)

    before = total()
    for step in range(8):
        opt.zero_grad()
        task.loss(model, batches[step % 2]).backward()
        opt.step()
    assert total() < 0.5 * before

"""ImageNet data: torchvision's ImageFolder over `<root>/train` and `<root>/val`, the standard
Inception-style augmentation, and a layout check that fails in one line before any run starts.

Training: RandomResizedCrop(size) + RandomHorizontalFlip (the augmentation of Goyal et al. 2017 and
torchvision's reference recipe); evaluation: Resize(size·256/224) + CenterCrop(size) (the standard
single-crop protocol, 256 -> 224 at full size). Both normalise with the ImageNet mean/std.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS, default_loader, has_file_allowed_extension, make_dataset
from torchvision.datasets.vision import StandardTransform
from torchvision.transforms import v2

from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks.base import seeded

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
LAYOUT = "<root>/{train,val}/<class>/<image>.JPEG (ImageFolder: one folder per class, same classes in both)"


def eval_resize(size: int) -> int:
    """Shorter side before the centre crop: the 256/224 ratio of the standard protocol."""
    return round(size * 256 / 224)


def train_transform(size: int, crop_scale: Sequence[float] = (0.08, 1.0)) -> v2.Compose:
    # Crop and resize on the PIL image first (cheaper than converting the full-size image).
    return v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=tuple(crop_scale), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.PILToTensor(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )


def eval_transform(size: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.Resize(eval_resize(size), antialias=True),
            v2.CenterCrop(size),
            v2.PILToTensor(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )


def collate(samples: Sequence[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.stack([image for image, _ in samples])
    labels = torch.tensor([label for _, label in samples], dtype=torch.long)
    return images, labels


INDEX = "index.csv"  # written by tasks.imagenet.prepare: split,path,class_index in ImageFolder's order


def read_index(index: Path, split: str) -> list[tuple[str, int]]:
    """(path relative to the split folder, class index) of the rows of `index` for `split`, in its order."""
    prefix, cut = f"{split}/", len(split) + 1
    samples: list[tuple[str, int]] = []
    with open(index, newline="") as f:
        for row in csv.DictReader(f):
            if row["split"] == split:
                path = row["path"]  # relative to the index's folder, "/"-separated
                rel = (
                    path[cut:]
                    if path.startswith(prefix)
                    else os.path.relpath(index.parent / path, index.parent / split)
                )
                samples.append((rel, int(row["class_index"])))
    return samples


def scan(folder: Path, class_to_idx: dict[str, int]) -> list[tuple[str, int]]:
    """ImageFolder's own walk of `folder` (torchvision's make_dataset), paths relative to `folder`."""
    base = str(folder)
    prefix, cut = base + os.sep, len(base) + 1
    found = make_dataset(base, class_to_idx, extensions=IMG_EXTENSIONS)
    return [(p[cut:] if p.startswith(prefix) else os.path.relpath(p, base), target) for p, target in found]


def folder_samples(folder: Path) -> list[tuple[str, int]]:
    """Every image of an ImageFolder split as (path relative to `folder`, class index), in ImageFolder's
    order: read from the prepared `index.csv` next to the folder when that lists this split (1.28 M
    files are not walked), else from a walk of the folder. What `image_folder` is built from; what rank 0
    reads and broadcasts (ImageNet.samples)."""
    folder = Path(folder)
    index = folder.parent / INDEX
    samples = read_index(index, folder.name) if index.is_file() else []
    if samples:
        return samples
    _, class_to_idx = ImageFolder.find_classes(ImageFolder, str(folder))  # type: ignore[arg-type]
    return scan(folder, class_to_idx)


def image_folder(folder: Path, transform: Any = None, samples: Sequence[tuple[str, int]] | None = None) -> ImageFolder:
    """torchvision's ImageFolder over `folder`, with the sample list `samples` (paths relative to
    `folder`, as `folder_samples` gives, e.g. received from rank 0) or, without it, `folder_samples(folder)`:
    the same samples in the same order as ImageFolder's own scan. Classes still come from the folder's
    subdirectories (one directory listing, as ImageFolder does)."""
    folder = Path(folder)
    classes, class_to_idx = ImageFolder.find_classes(ImageFolder, str(folder))  # type: ignore[arg-type]
    relative = folder_samples(folder) if samples is None else samples
    if not relative:
        raise UserError(f"imagenet: no images in {folder}; expected {LAYOUT}")
    for path, target in (relative[0], relative[-1]):  # a cheap check that the list belongs to this tree
        wnid = Path(path).parent.name
        if class_to_idx.get(wnid) != target:
            raise UserError(
                f"imagenet: {folder.parent / INDEX} gives {folder / path} class {target}, the folders say "
                f"{class_to_idx.get(wnid)}"
            )
    base = str(folder)
    listed = [(os.path.join(base, path), target) for path, target in relative]
    dataset = ImageFolder.__new__(ImageFolder)
    dataset.root, dataset.transform, dataset.target_transform = base, transform, None
    dataset.transforms = StandardTransform(transform, None)
    dataset.loader, dataset.extensions = default_loader, IMG_EXTENSIONS
    dataset.allow_empty = False
    dataset.classes, dataset.class_to_idx = classes, class_to_idx
    dataset.samples, dataset.imgs = listed, listed
    dataset.targets = [t for _, t in listed]
    return dataset


class TrainSet:
    """ImageFolder items indexed by `(index, key)`: the random crop and flip are a function of `key`."""

    def __init__(
        self,
        folder: Path,
        size: int,
        crop_scale: Sequence[float] = (0.08, 1.0),
        samples: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        self.folder = image_folder(folder, samples=samples)  # no transform: applied below under seeded(key)
        self.transform = train_transform(size, crop_scale)
        self.classes = self.folder.classes

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, item: tuple[int, int]) -> tuple[torch.Tensor, int]:
        index, key = item
        image, label = self.folder[index]
        with seeded(key):
            x = self.transform(image)
        return x, label

    def collate(self, samples: Sequence[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        return collate(samples)


def eval_folder(folder: Path, size: int, samples: Sequence[tuple[str, int]] | None = None) -> ImageFolder:
    return image_folder(folder, transform=eval_transform(size), samples=samples)


def _has_image(directory: str) -> bool:
    """Whether ImageFolder would find at least one image under `directory` (it walks recursively,
    following links); stops at the first one, so it is cheap on a full ImageNet class folder."""
    subdirs = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir():
                subdirs.append(entry.path)
            elif has_file_allowed_extension(entry.name, IMG_EXTENSIONS):
                return True
    return any(_has_image(sub) for sub in subdirs)


def _names(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def _split_classes(root: Path, split: str) -> list[str]:
    path = root / split
    if not path.is_dir():
        raise UserError(f"imagenet: missing split folder {path}; expected {LAYOUT}")
    classes = sorted(entry.name for entry in os.scandir(path) if entry.is_dir())
    if not classes:
        if _has_image(str(path)):
            # The official ImageNet val archive is flat; ImageFolder needs it sorted into class folders.
            raise UserError(
                f"imagenet: {path} holds images but no class folders; sort them into one folder per class "
                f"(e.g. with the usual valprep.sh); expected {LAYOUT}"
            )
        raise UserError(f"imagenet: split {path} has no images; expected {LAYOUT}")
    empty = [name for name in classes if not _has_image(str(path / name))]
    if len(empty) == len(classes):
        raise UserError(f"imagenet: split {path} has no images; expected {LAYOUT}")
    if empty:
        raise UserError(f"imagenet: class folders with no images in {path}: {_names(empty)}; expected {LAYOUT}")
    return classes


def check_layout(root: Path, train_dir: str = "train", val_dir: str = "val") -> list[str]:
    """Check the ImageFolder layout without reading the images; return the class names."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"imagenet: data root {root} does not exist; expected {LAYOUT}")
    train = _split_classes(root, train_dir)
    val = _split_classes(root, val_dir)
    if train != val:
        only_train = sorted(set(train) - set(val))
        only_val = sorted(set(val) - set(train))
        parts = [
            f"only in {train_dir}/: {_names(only_train)}" if only_train else "",
            f"only in {val_dir}/: {_names(only_val)}" if only_val else "",
        ]
        raise UserError(
            f"imagenet: {root / train_dir} and {root / val_dir} have different class folders ("
            + "; ".join(p for p in parts if p)
            + f"); expected {LAYOUT}"
        )
    return train


def data_settings(cfg: RunSpec) -> dict[str, Any]:
    """The preset's data settings with their defaults filled in."""
    data = dict(cfg.data)
    data.setdefault("train_dir", "train")
    data.setdefault("val_dir", "val")
    data.setdefault("image_size", 224)
    data.setdefault("crop_scale", [0.08, 1.0])
    data.setdefault("eval_batch_size", int(cfg.batch_size))
    data.setdefault("pin_memory", False)
    return data


PAPER_CLASSES, PAPER_VAL = 1000, 50_000  # ILSVRC-2012: its classes and validation images


def _files(folder: Path) -> list[Path]:
    return [Path(e.path) for e in os.scandir(folder) if e.is_file() and not e.name.startswith(".")]


def paper_problems(root: Path, cfg: RunSpec) -> list[str]:
    """One line per way the data under `root` is not the full ImageNet: 1000 class folders per split,
    50 000 validation images (counted as files), and one readable image per split."""
    from PIL import Image

    data = cfg.data
    problems = []
    for split in (data.get("train_dir", "train"), data.get("val_dir", "val")):
        folder = root / split
        classes = sorted(e.path for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))
        if len(classes) != PAPER_CLASSES:
            problems.append(
                f"imagenet: {folder}: {len(classes)} class folders, the paper preset expects {PAPER_CLASSES}"
            )
        if split == data.get("val_dir", "val"):
            count = sum(len(_files(Path(c))) for c in classes)
            if count != PAPER_VAL:
                problems.append(f"imagenet: {folder}: {count} validation images, the paper preset expects {PAPER_VAL}")
        sample = next((f for c in classes for f in _files(Path(c))[:1]), None)
        if sample is None:
            problems.append(f"imagenet: {folder}: no image files")
            continue
        try:
            with Image.open(sample) as im:
                im.convert("RGB")
        except Exception as e:
            problems.append(f"imagenet: {sample}: unreadable ({type(e).__name__})")
    return problems

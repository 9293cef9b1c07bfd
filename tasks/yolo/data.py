"""PASCAL VOC (or the tiny shapes set) in ultralytics' YOLO layout, loaded by ultralytics' YOLODataset.

On disk, as ultralytics' own `VOC.yaml` download produces it:

    <root>/<name>.yaml          [path,] train, val, names (train/val: a folder or a list of folders)
    <root>/images/<split>/*.jpg
    <root>/labels/<split>/*.txt one "class cx cy w h" line per box, coordinates normalised to [0, 1]

The YAML is read here rather than by ultralytics' `check_det_dataset`, which may download a missing
dataset, run the YAML's `download:` script and fetch fonts. Split folders resolve against the data
root when they exist there (so a copied or moved dataset keeps working), else against the YAML's
`path` (absolute, or relative to the root). When `<root>/<name>.yaml` is absent but ultralytics ships a
dataset YAML of that name (e.g. VOC.yaml: train = VOC2007+2012 trainval, val = VOC2007 test), that file
is used with the root as its path: the root can be ultralytics' `datasets/VOC` folder as downloaded.

Items are built by ultralytics' YOLODataset (via `build_yolo_dataset`, the trainer's own builder)
with its augmentation pipeline and `collate_fn`. Its randomness comes from python `random` and the
numpy global RNG (plus torch in a few transforms); `YoloTrainSet` seeds all three from the item's key
and restores them afterwards, so an item is a pure function of (index, key). ultralytics' Mosaic
normally draws its three partner images from a buffer of recently loaded images, i.e. from the call
history; we switch it to drawing from the whole dataset (the path ultralytics itself takes with
cache='ram'), which keeps the augmentation and makes it history-free.

Label caching: YOLODataset writes `labels/<split>.cache` next to the label folders (inside the data
root) and nothing elsewhere; images are not cached to disk (no *.npy files). The cache is keyed by
absolute paths, so a moved set is rescanned once; runs starting together may each write it, and one
that reads a half-written cache just rescans (ultralytics catches the failed load). ultralytics reads it
with `np.load(allow_pickle=True)`, a plain unpickle that runs whatever a crafted cache names; `safe_cache`
replaces that reader (in ultralytics.data.dataset, where it is called) with one that unpickles through
bench.core.safepickle: numpy arrays and plain containers only. A refused cache gets a one-line warning naming
the file and the global, and is rebuilt by ultralytics' rescan, as a stale one is.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.core import safefs, safepickle
from bench.core.errors import UserError
from bench.core.yamlsafe import load_yaml
from tasks.base import seeded

from . import offline
from .loss import with_padded_targets

LAYOUT = (
    "a dataset YAML (path, train, val, names) with images/<split>/*.jpg and labels/<split>/*.txt "
    "holding 'class cx cy w h' lines normalised to [0, 1] (ultralytics' YOLO/VOC layout)"
)
_IMG_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


@dataclass
class DataSpec:
    """A resolved dataset YAML: class names and absolute image folders per split."""

    yaml_file: Path
    names: dict[int, str]
    train: list[str]
    val: list[str]

    def as_ultralytics(self) -> dict[str, Any]:
        """The `data` dict YOLODataset and DetectionValidator expect."""
        return {
            "yaml_file": str(self.yaml_file),
            "path": str(self.yaml_file.parent),
            "train": self.train,
            "val": self.val,
            "names": dict(self.names),
            "nc": len(self.names),
            "channels": 3,
        }


def _find_yaml(root: Path, name: str) -> tuple[Path, dict]:
    own = root / name
    if own.is_file():
        path = own
    else:
        offline.ensure()
        from ultralytics.utils import ROOT

        packaged = ROOT / "cfg" / "datasets" / name
        if not packaged.is_file():
            raise UserError(f"{own}: dataset YAML not found; expected {LAYOUT}")
        path = packaged
    try:
        data = load_yaml(safefs.read_text(path, MAX_YAML), str(path))  # YAML 1.2, duplicate keys refused
    except safefs.Refused:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable YAML ({e.__class__.__name__}); expected {LAYOUT}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a mapping; expected {LAYOUT}")
    return path, data


def _names(path: Path, data: dict) -> dict[int, str]:
    names = data.get("names")
    if isinstance(names, list):
        names = dict(enumerate(names))
    if not isinstance(names, dict) or not names:
        raise UserError(f"{path}: missing or empty 'names'; expected {LAYOUT}")
    try:
        out = {int(k): str(v) for k, v in names.items()}
    except (TypeError, ValueError):
        raise UserError(f"{path}: 'names' keys must be class indices; expected {LAYOUT}") from None
    if sorted(out) != list(range(len(out))):
        raise UserError(f"{path}: 'names' must number classes 0..{len(out) - 1}; expected {LAYOUT}")
    return out


def _has_image(folder: Path) -> bool:
    with os.scandir(folder) as it:
        return any(e.is_file() and Path(e.name).suffix.lower() in _IMG_SUFFIXES for e in it)


def _split_dirs(root: Path, yaml_path: Path, data: dict, split: str) -> list[str]:
    entries = data.get(split)
    if isinstance(entries, str):
        entries = [entries]
    if not entries or not all(isinstance(e, str) for e in entries):
        raise UserError(f"{yaml_path}: missing '{split}' split; expected {LAYOUT}")
    base = root
    if not all((root / e).exists() for e in entries) and data.get("path"):
        base = root / str(data["path"])  # an absolute `path` replaces root here
    out = []
    for entry in entries:
        folder = (base / entry).resolve()
        if not folder.is_dir():
            raise UserError(f"{folder}: missing image folder of split '{split}'; expected {LAYOUT}")
        if "images" not in folder.parts:
            raise UserError(f"{folder}: image folders must sit under an 'images' folder; expected {LAYOUT}")
        images = f"{os.sep}images{os.sep}"  # ultralytics' img2label_paths: last /images/ -> /labels/
        labels = Path(f"{os.sep}labels{os.sep}".join(f"{folder}{os.sep}".rsplit(images, 1)))
        if not labels.is_dir():
            raise UserError(f"{labels}: missing label folder of split '{split}'; expected {LAYOUT}")
        if not _has_image(folder):
            raise UserError(f"{folder}: no images in split '{split}'; expected {LAYOUT}")
        out.append(str(folder))
    return out


def read_spec(root: Path, name: str, nc: int | None = None) -> DataSpec:
    """Resolve and check the dataset YAML `name` under `root`; UserError (one line) on any problem."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise UserError(f"{root}: data root is not a folder; expected {LAYOUT}")
    path, data = _find_yaml(root, name)
    names = _names(path, data)
    if nc is not None and len(names) != nc:
        raise UserError(f"{path}: {len(names)} classes but model.nc is {nc}; set model.nc={len(names)}")
    return DataSpec(path, names, _split_dirs(root, path, data, "train"), _split_dirs(root, path, data, "val"))


def ultralytics_cfg(data_cfg: dict[str, Any], **overrides: Any):
    """ultralytics' default hyperparameters (get_cfg) with the preset's augmentation and image size."""
    offline.ensure()
    from ultralytics.cfg import get_cfg

    args = {"task": "detect", "mode": "train", "imgsz": int(data_cfg["imgsz"]), "plots": False}
    args.update(data_cfg.get("augment", {}))
    args.update(overrides)
    return get_cfg(overrides=args)


MAX_YAML = 4 << 20  # a dataset YAML (VOC.yaml is 4 kB)
MAX_LABEL_CACHE = 2 << 30  # VOC's caches are a few MB; COCO's ~100 MB


def load_cache(path: Path) -> dict:
    """ultralytics' label cache (an `np.save` of a dict) read without running anything in it; raises (so
    ultralytics rescans) on a missing, damaged or refused file, with a warning for a refused one."""
    path = Path(path)
    try:
        f = safefs.open_file(path, "rb", MAX_LABEL_CACHE)  # a link, a FIFO or a huge file: refused at once
    except safefs.Refused as e:
        print(f"adascale-bench: warning: {e}; ultralytics rescans the labels and rewrites it", file=sys.stderr)
        raise
    with f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"{path}: not a label cache (npy format {version})")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _fortran, dtype = read_header(f)
        if shape != () or dtype != np.dtype(object):
            raise ValueError(f"{path}: not a label cache (a {dtype} array of shape {shape})")
        body = f.read()
    try:
        holder = safepickle.load(body, what="label cache", objects=True, name=path)
    except safepickle.PickleRefused as e:
        print(f"adascale-bench: warning: {e}; ultralytics rescans the labels and rewrites it", file=sys.stderr)
        raise
    cache = holder.item() if isinstance(holder, np.ndarray) and holder.shape == () else None
    if not isinstance(cache, dict):
        raise ValueError(f"{path}: not a label cache (no dict inside)")
    return cache


def safe_cache() -> None:
    """Point ultralytics' YOLODataset (and its classification twin) at `load_cache` (idempotent)."""
    offline.ensure()
    from ultralytics.data import dataset

    dataset.load_dataset_cache_file = load_cache


def build_dataset(spec: DataSpec, data_cfg: dict[str, Any], mode: str, batch: int, stride: int = 32):
    """ultralytics' YOLODataset for `mode` 'train' (augmented) or 'val' (letterboxed, rectangular batches,
    as ultralytics' trainer builds its validation set)."""
    safe_cache()
    from ultralytics.data.augment import Mosaic
    from ultralytics.data.build import build_yolo_dataset

    cfg = ultralytics_cfg(data_cfg, mode=mode)
    paths = spec.train if mode == "train" else spec.val
    try:
        ds = build_yolo_dataset(
            cfg, paths, batch, spec.as_ultralytics(), mode=mode, rect=mode != "train", stride=stride
        )
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__
        raise UserError(f"{paths[0]}: {first}; expected {LAYOUT}") from None
    for t in _walk(ds.transforms):
        if isinstance(t, Mosaic):
            t.buffer_enabled = False  # partners drawn from the whole dataset, not the load history
    return ds


def _walk(transform) -> Iterator[Any]:
    yield transform
    for attr in ("transforms", "pre_transform"):
        child = getattr(transform, attr, None)
        if isinstance(child, list):
            for t in child:
                yield from _walk(t)
        elif child is not None:
            yield from _walk(child)


@contextlib.contextmanager
def seeded_all(key: int) -> Iterator[None]:
    """Seed python `random`, numpy's global RNG and torch from `key`; restore all three afterwards."""
    py, npy = random.getstate(), np.random.get_state()
    random.seed(key)
    np.random.seed(key % (2**32))
    try:
        with seeded(key):
            yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


class YoloTrainSet:
    """The engine's TrainSet over an augmenting YOLODataset: items are pure functions of (index, key)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item: tuple[int, int]) -> dict[str, Any]:
        index, key = item
        with seeded_all(key):
            return self.dataset[int(index)]

    def collate(self, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """ultralytics' collate_fn (stacked uint8 images, concatenated boxes with a batch_idx column), plus the
        boxes padded per image, `targets` and `target_mask`, which the sync-free loss reads (tasks.yolo.loss):
        made here, in the loader workers, where the box counts are on the host."""
        return with_padded_targets(self.dataset.collate_fn(list(samples)))


@dataclass
class YoloEvalSet:
    """The validation YOLODataset with what evaluation needs alongside it."""

    dataset: Any
    spec: DataSpec
    batch_size: int

    def loader(self) -> torch.utils.data.DataLoader:
        # In order and unshuffled: rect mode gives each consecutive batch its own letterbox shape.
        return torch.utils.data.DataLoader(
            self.dataset, batch_size=self.batch_size, shuffle=False, collate_fn=self.dataset.collate_fn
        )

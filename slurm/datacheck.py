"""Before `submit` sends a single job: is every data root the matrix uses there, and right for its preset?

Each task's own `check_data(root, spec)` once per distinct (task, root); for the paper preset also the split
sizes (CIFAR-10: 50 000 training and 10 000 test images; ImageNet: 1 000 classes, 50 000 validation images,
counted as files) and one readable sample per split. Every problem is one line; all of them are reported.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from bench.errors import UserError
from bench.experiments import matrix as matrices

CIFAR_TRAIN, CIFAR_TEST = 50_000, 10_000
IMAGENET_CLASSES, IMAGENET_VAL = 1000, 50_000


def _cifar10(root: Path, spec: dict[str, Any]) -> list[str]:
    from tasks.cifar10.data import BASE_FOLDER, TEST_FILES, TRAIN_FILES, resolve_root

    folder = resolve_root(root) / BASE_FOLDER
    problems = []
    for split, files, expected in (("train", TRAIN_FILES, CIFAR_TRAIN), ("test", TEST_FILES, CIFAR_TEST)):
        try:
            with open(folder / files[0], "rb") as f:  # one sample per split: its first pickle
                labels = pickle.load(f, encoding="latin1")["labels"]
        except Exception as e:  # any unpickling failure means a malformed file
            problems.append(f"cifar10: {folder / files[0]}: unreadable ({type(e).__name__})")
            continue
        count = len(labels) * len(files)
        if count != expected:
            problems.append(
                f"cifar10: {folder}: {count} {split} images ({len(files)} × {len(labels)}), the paper preset "
                f"expects {expected}"
            )
    return problems


def _files(folder: Path) -> list[Path]:
    return [Path(e.path) for e in os.scandir(folder) if e.is_file() and not e.name.startswith(".")]


def _imagenet(root: Path, spec: dict[str, Any]) -> list[str]:
    from PIL import Image

    data = spec.get("data", {})
    problems = []
    for split in (data.get("train_dir", "train"), data.get("val_dir", "val")):
        folder = root / split
        classes = sorted(e.path for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))
        if len(classes) != IMAGENET_CLASSES:
            problems.append(f"imagenet: {folder}: {len(classes)} class folders, the paper preset expects 1000")
        if split == data.get("val_dir", "val"):
            count = sum(len(_files(Path(c))) for c in classes)
            if count != IMAGENET_VAL:
                problems.append(f"imagenet: {folder}: {count} validation images, the paper preset expects 50000")
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


PAPER_SIZES = {"cifar10": _cifar10, "imagenet": _imagenet}


def data_problems(m: matrices.Matrix, sizes: bool = True) -> list[str]:
    """One line per problem with the data roots of the matrix's runs (empty: all good). The roots are per
    task, so one run of each task stands for all of them. `sizes` False: not the paper's data set sizes
    (a rehearsal may run on a sample of the data in its published form)."""
    from tasks import get_task

    problems: list[str] = []
    first = {}
    for req in m.runs:
        first.setdefault(req.task, req)
    for name, req in first.items():
        task = get_task(name)
        if not task.needs_data:
            continue
        try:
            spec = m.spec(req)
        except UserError as e:
            problems.append(str(e))
            continue
        root = Path(spec["data_root"])
        if m.preset == "tiny" and not root.exists():
            continue  # the tiny data set is written on first use
        try:
            task.check_data(root, spec)
        except UserError as e:
            problems.append(f"{name} data root {root}: {e}")
            continue
        except OSError as e:
            problems.append(f"{name} data root {root}: {e.strerror or e}")
            continue
        if sizes and m.preset == "paper" and name in PAPER_SIZES:
            problems += PAPER_SIZES[name](root, spec)
    return problems

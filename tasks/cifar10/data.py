"""CIFAR-10 on disk (`cifar-10-batches-py` pickles) read in torchvision's CIFAR10 layout, without running
anything in the pickles (bench.core.safepickle), and the training/evaluation sets built on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torchvision.datasets import CIFAR10
from torchvision.datasets.utils import check_integrity
from torchvision.datasets.vision import VisionDataset
from torchvision.transforms import v2

from bench.core import safepickle
from bench.core.errors import UserError

BASE_FOLDER = CIFAR10.base_folder  # "cifar-10-batches-py"
TRAIN_FILES = [name for name, _ in CIFAR10.train_list]  # data_batch_1 .. data_batch_5
TEST_FILES = [name for name, _ in CIFAR10.test_list]  # test_batch
META_FILE = CIFAR10.meta["filename"]  # batches.meta
EXPECTED = (
    f"a {BASE_FOLDER}/ folder with {', '.join(TRAIN_FILES + TEST_FILES)} and {META_FILE} "
    "(the CIFAR-10 python pickles, torchvision CIFAR10 layout)"
)

# Per-channel mean and standard deviation of the CIFAR-10 training images (pixel values in [0, 1]).
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


class CIFAR10Pickles(CIFAR10):
    """torchvision's CIFAR10 (its layout, file lists, md5s and __getitem__), with the md5 check optional
    and the pickles read by bench.core.safepickle instead of pickle.load.

    torchvision 0.26 reads each batch with a plain `pickle.load`, which runs whatever a crafted batch
    names (a `cifar-10-python.tar.gz` from a colleague, a re-pickled copy). Here `__init__` and
    `_load_meta` do what torchvision's do (stack each batch's `data`, reshape to (N, 3, 32, 32), transpose
    to HWC; `labels`, or `fine_labels`; the meta file's `label_names`) on a restricted unpickle that builds
    numpy arrays, lists, str and bytes only and refuses any other global in one line naming the file.
    With `verify_md5` the files must match torchvision's official md5s (`check_files`); without, any file
    in the same format is read (the tiny preset's). `download` is never possible: nothing is fetched.
    """

    def __init__(self, root: Path, train: bool, verify_md5: bool) -> None:
        if not verify_md5:
            self.train_list = [[name, None] for name, _ in CIFAR10.train_list]
            self.test_list = [[name, None] for name, _ in CIFAR10.test_list]
            self.meta = {**CIFAR10.meta, "md5": None}
        VisionDataset.__init__(self, str(root))
        self.train = train
        if not self._check_integrity():
            raise RuntimeError("Dataset not found or corrupted (md5 or missing file)")
        chunks, self.targets = [], []
        for file_name, _ in self.train_list if train else self.test_list:
            path = Path(self.root, self.base_folder, file_name)
            entry = _read_batch(path)
            labels = entry["labels"] if "labels" in entry else entry["fine_labels"]
            if not isinstance(labels, list) or not all(type(v) is int for v in labels):
                raise UserError(f"{path}: 'labels' is not a list of integers; expected {EXPECTED}")
            chunks.append(entry["data"])
            self.targets.extend(labels)
        self.data = np.vstack(chunks).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        self._load_meta()

    def _load_meta(self) -> None:
        path = Path(self.root, self.base_folder, self.meta["filename"])
        if not check_integrity(str(path), self.meta["md5"]):
            raise RuntimeError(f"{path}: not found or md5 differs")
        self.classes = _label_names(path)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}


def _read_batch(path: Path) -> dict:
    """One data/test batch: a dict holding a uint8 `data` array and `labels` (or `fine_labels`)."""
    entry = safepickle.load(path, what="CIFAR-10 batch")
    if not isinstance(entry, dict) or "data" not in entry or ("labels" not in entry and "fine_labels" not in entry):
        raise UserError(f"{path}: not a dict with 'data' and 'labels'; expected {EXPECTED}")
    if not isinstance(entry["data"], np.ndarray) or entry["data"].dtype != np.uint8:
        raise UserError(f"{path}: 'data' is not a uint8 array; expected {EXPECTED}")
    return entry


def _label_names(path: Path) -> list[str]:
    meta = safepickle.load(path, what="CIFAR-10 batches.meta")
    names = meta.get(CIFAR10.meta["key"]) if isinstance(meta, dict) else None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise UserError(f"{path}: 'label_names' is not a list of names; expected {EXPECTED}")
    return names


def resolve_root(root: Path) -> Path:
    """The folder that holds `cifar-10-batches-py` (torchvision's `root`); accepts that folder itself."""
    root = Path(root)
    if not (root / BASE_FOLDER).is_dir() and root.name == BASE_FOLDER and root.is_dir():
        return root.parent
    return root


def check_files(root: Path, verify_md5: bool) -> None:
    """One-line UserError unless every pickle is present (and official, when `verify_md5`)."""
    folder = resolve_root(root) / BASE_FOLDER
    if not folder.is_dir():
        raise UserError(f"{folder}: folder not found; expected {EXPECTED}")
    missing = [n for n in TRAIN_FILES + TEST_FILES + [META_FILE] if not (folder / n).is_file()]
    if missing:
        raise UserError(f"{folder}: missing {', '.join(missing)}; expected {EXPECTED}")
    if verify_md5:
        for name, md5 in CIFAR10.train_list + CIFAR10.test_list + [[META_FILE, CIFAR10.meta["md5"]]]:
            if not check_integrity(str(folder / name), md5):
                raise UserError(
                    f"{folder / name}: md5 differs from the official CIFAR-10 file; expected {EXPECTED} "
                    "(set data.verify_md5=false to accept other files in this format)"
                )
    _label_names(folder / META_FILE)


def load_split(root: Path, train: bool, verify_md5: bool) -> CIFAR10Pickles:
    """Read one split with torchvision's reader; malformed files become a one-line UserError."""
    check_files(root, verify_md5)
    folder = resolve_root(root) / BASE_FOLDER
    files = ", ".join(TRAIN_FILES if train else TEST_FILES)
    try:
        ds = CIFAR10Pickles(resolve_root(root), train=train, verify_md5=verify_md5)
    except UserError:  # a refused or malformed batch, already one line naming it
        raise
    except Exception as exc:  # numpy raises whatever it raises on batches of mismatched shapes
        detail = " ".join(str(exc).split())  # the CLI prints one line
        raise UserError(
            f"{folder}: cannot read {files} ({exc.__class__.__name__}: {detail}); expected {EXPECTED}"
        ) from None
    n = len(ds.data)
    if ds.data.dtype.name != "uint8" or len(ds.targets) != n or n == 0:
        raise UserError(
            f"{folder}: {files} hold {n} images ({ds.data.dtype}) and {len(ds.targets)} labels; "
            f"expected as many uint8 32x32x3 images as labels"
        )
    if min(ds.targets) < 0 or max(ds.targets) >= len(ds.classes):
        raise UserError(f"{folder}: labels in {files} outside 0..{len(ds.classes) - 1} ({META_FILE})")
    return ds


def check_model_classes(ds: CIFAR10, model_classes: int, root: Path) -> None:
    """The labels (already within the meta's names, `load_split`) fit the model's `model_classes` outputs:
    a meta of 11 names with a label 10 is one line, in `prepare` and before a run trains, never cross
    entropy's "Target 10 is out of bounds" mid-run."""
    folder = resolve_root(root) / BASE_FOLDER
    top = max(ds.targets, default=0)
    if len(ds.classes) != model_classes or top >= model_classes:
        raise UserError(
            f"{folder / META_FILE}: {len(ds.classes)} classes (labels up to {top}), but the model has "
            f"{model_classes} outputs; expected {model_classes} classes (model.num_classes)"
        )


def _to_tensors(ds: CIFAR10) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images as one (N, 3, 32, 32) tensor, labels as int64: kept in memory, indexed per item."""
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    return images, torch.tensor(ds.targets, dtype=torch.int64)


# uint8 -> float in [0, 1] -> per-channel standardisation; applied to whole batches (vectorised).
_normalize = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])


def normalize(images: torch.Tensor) -> torch.Tensor:
    """Float, standardised images from uint8 images (N, 3, H, W)."""
    return _normalize(images)


PAD = 4  # the standard CIFAR recipe: a random 32 × 32 crop of the image zero-padded by 4 pixels, then a flip
RECIPE = v2.Compose([v2.RandomCrop(32, padding=PAD), v2.RandomHorizontalFlip()])  # the reference of `crop_flip`


def crop_flip(image: torch.Tensor, key: int, generator: torch.Generator) -> torch.Tensor:
    """RECIPE applied to one uint8 CIFAR image (3, 32, 32) under `seeded(key)`, bit for bit, at a third of its cost.

    torchvision 0.26's v2 draws, from the global generator: RandomCrop's top then left offset
    (`torch.randint(0, 2·PAD + 1, size=())` each, in the padded image), then RandomHorizontalFlip's
    `torch.rand(1) >= 0.5` (true: no flip). Here the same three draws come from `generator` seeded by `key` (the
    same Mersenne twister as the global one), the padded crop is one copy of the image's overlap into zeros
    and the flip one `flip`: no pytree walk, no kernel dispatch, no save and restore of the global state (each
    ~0.1 ms, paid per item: an S = 64 cifar10 run augments 51 200 items). tests/tasks/test_task_cifar10.py
    checks equality with RECIPE under `seeded` over thousands of keys, every offset and both flips."""
    generator.manual_seed(key)
    top = int(torch.randint(0, 2 * PAD + 1, size=(), generator=generator))
    left = int(torch.randint(0, 2 * PAD + 1, size=(), generator=generator))
    flip = not bool(torch.rand(1, generator=generator) >= 0.5)
    _, h, w = image.shape
    out = torch.zeros_like(image)
    y0, y1 = max(top, PAD), min(top + h, PAD + h)  # the image's rows inside the crop window, padded coordinates
    x0, x1 = max(left, PAD), min(left + w, PAD + w)
    out[:, y0 - top : y1 - top, x0 - left : x1 - left] = image[:, y0 - PAD : y1 - PAD, x0 - PAD : x1 - PAD]
    return out.flip(-1) if flip else out


class TrainSet:
    """The training split in memory as uint8; items are augmented with the standard CIFAR recipe.

    Items stay uint8 (cheap to crop, flip and stack); `collate` normalises the stacked micro-batch in
    one vectorised op rather than per item. Augmentation randomness is a pure function of `key`
    (`crop_flip`: torchvision's RECIPE under `seeded(key)`, bit for bit).
    """

    def __init__(self, ds: CIFAR10) -> None:
        self.images, self.labels = _to_tensors(ds)
        self.classes: list[str] = list(ds.classes)
        self._generator = torch.Generator()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, item: tuple[int, int]) -> tuple[torch.Tensor, int]:
        index, key = item
        return crop_flip(self.images[index], key, self._generator), int(self.labels[index])

    def collate(self, samples: Sequence[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        images = normalize(torch.stack([s[0] for s in samples]))
        return images, torch.tensor([s[1] for s in samples], dtype=torch.int64)


@dataclass
class EvalSet:
    """The test split in memory: uint8 images (N, 3, 32, 32), int64 labels, class names."""

    images: torch.Tensor
    labels: torch.Tensor
    classes: list[str]

    @classmethod
    def from_dataset(cls, ds: CIFAR10) -> EvalSet:
        images, labels = _to_tensors(ds)
        return cls(images, labels, list(ds.classes))

    def __len__(self) -> int:
        return len(self.labels)


PAPER_SPLITS = {"train": 50_000, "test": 10_000}  # CIFAR-10's images per split, as the paper trains on them


def paper_problems(root: Path) -> list[str]:
    """One line per way the data under `root` is not the full CIFAR-10 (PAPER_SPLITS): each split's count,
    read as the first pickle's labels × the split's files (one readable sample per split)."""
    folder = resolve_root(root) / BASE_FOLDER
    problems = []
    for (split, expected), files in zip(PAPER_SPLITS.items(), (TRAIN_FILES, TEST_FILES), strict=True):
        path = folder / files[0]  # one sample per split: its first pickle
        try:
            entry = safepickle.load(path, what="CIFAR-10 batch")
            labels = entry["labels"] if isinstance(entry, dict) else None
            if not isinstance(labels, list):
                raise UserError(f"{path}: no 'labels' list; expected {EXPECTED}")
        except (UserError, KeyError) as e:  # refused or malformed: its own line names the file
            problems.append(f"cifar10: {e}")
            continue
        count = len(labels) * len(files)
        if count != expected:
            problems.append(
                f"cifar10: {folder}: {count} {split} images ({len(files)} × {len(labels)}), the paper preset "
                f"expects {expected}"
            )
    return problems

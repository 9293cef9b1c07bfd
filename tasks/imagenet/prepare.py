"""`prepare imagenet`: ILSVRC2012 as published into the ImageFolder layout the task reads,

    <out>/train/<wnid>/*.JPEG   <out>/val/<wnid>/*.JPEG   <out>/index.csv   <out>/PREPARED.json

`source` is a folder holding, under their published names (the first match of each wins):

    training images    ILSVRC2012_img_train.tar (a tar of per-class tars n01440764.tar ...), or a folder
                       ILSVRC2012_img_train/, train/ or Kaggle's ILSVRC/Data/CLS-LOC/train/ holding
                       per-class folders <wnid>/*.JPEG and/or per-class tars <wnid>.tar
    validation images  ILSVRC2012_img_val.tar, or a flat folder ILSVRC2012_img_val/, val/ or Kaggle's
                       ILSVRC/Data/CLS-LOC/val/ of ILSVRC2012_val_00000001.JPEG ...
    validation labels  ILSVRC2012_devkit_t12.tar.gz (or its extracted ILSVRC2012_devkit_t12/ folder):
                       data/meta.mat + data/ILSVRC2012_validation_ground_truth.txt, read as torchvision's
                       parse_devkit_archive reads them; or Kaggle's LOC_val_solution.csv
                       (ImageId,PredictionString; the first token of PredictionString is the wnid)

Files of extracted folders are hard-linked (else symlinked, else copied: `link_or_copy`); tar members are
extracted (filter="data"). Every image's file size and header are checked first (`preparing.check_image`:
a JPEG or PNG signature, a header PIL reads, bounded bytes and pixels, then every pixel decoded as the run's
default_loader decodes it), so no damaged or truncated image is verified.
torchvision's own `parse_devkit_archive` / `parse_val_archive` are not called:
they insist on the official md5s (so no test archive can pass), write meta.bin next to the source and
sort the val folder in place; the devkit is read here the same way (leaf synsets of meta.mat, ground
truth line i = image i). An interrupted run resumes: finished class folders are kept.

`index.csv` lists `split,path,class_index` in ImageFolder's own order (torchvision's `make_dataset`
over the written folders), so a run can skip re-scanning 1.28 M files.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tarfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import scipy.io
from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension, make_dataset
from torchvision.datasets.imagenet import ARCHIVE_META

from bench.core import safefs
from bench.core.errors import UserError
from tasks import preparing
from tasks.preparing import finish, folder_bytes, human_bytes, link_or_copy, prepared, safe_id, staged

from .data import check_layout

TASK = "imagenet"
TRAIN_TAR, VAL_TAR, DEVKIT = (ARCHIVE_META[k][0] for k in ("train", "val", "devkit"))
DEVKIT_DIR = DEVKIT.removesuffix(".tar.gz")  # ILSVRC2012_devkit_t12
META_MAT = "data/meta.mat"
GROUND_TRUTH = "data/ILSVRC2012_validation_ground_truth.txt"
KAGGLE_CSV = "LOC_val_solution.csv"
KAGGLE = "ILSVRC/Data/CLS-LOC"
INDEX = "index.csv"
CANDIDATES = {
    "training images": [TRAIN_TAR, "ILSVRC2012_img_train", "train", f"{KAGGLE}/train"],
    "validation images": [VAL_TAR, "ILSVRC2012_img_val", "val", f"{KAGGLE}/val"],
    "validation labels": [DEVKIT, DEVKIT_DIR, KAGGLE_CSV],
}
MAX_DEVKIT = 256 << 20  # the devkit's meta.mat and ground truth, Kaggle's CSV: a few MB
VAL_IMAGE = re.compile(r"ILSVRC2012_val_(\d{8})\.JPEG")


def find_sources(source: Path) -> dict[str, Path]:
    """The training images, validation images and validation labels under `source`, by published name."""
    source = Path(source)
    if not safefs.is_dir(source):
        raise UserError(f"{source}: not a folder; expected a folder holding {TRAIN_TAR}, {VAL_TAR} and {DEVKIT}")
    found, missing = {}, []
    for what, names in CANDIDATES.items():
        hit = next((source / n for n in names if preparing.exists(source / n)), None)
        if hit is None:
            missing.append(f"{what} ({' or '.join(names)})")
        found[what] = hit
    if missing:
        raise UserError(f"{source}: missing {'; '.join(missing)}")
    return found


def _bar(items: Iterable, desc: str, show: bool, total: int | None = None) -> Iterable:
    return preparing.progress(items, desc, total=total) if show else items


# --- validation labels -------------------------------------------------------------------------------


def _devkit_files(path: Path) -> tuple[io.BytesIO, str]:
    """meta.mat (bytes) and the ground-truth text from the devkit archive or its extracted folder."""
    if safefs.is_dir(path):
        try:
            return io.BytesIO(safefs.read_bytes(path / META_MAT, MAX_DEVKIT)), safefs.read_text(
                path / GROUND_TRUTH, MAX_DEVKIT
            )
        except safefs.Refused:
            raise
        except (OSError, UnicodeDecodeError):
            raise UserError(f"{path}: missing {META_MAT} or {GROUND_TRUTH}; expected the ILSVRC2012 devkit") from None
    try:
        with safefs.open_file(path) as f, tarfile.open(fileobj=f) as tar:
            members = {m.name.split("/", 1)[-1]: m for m in tar.getmembers() if m.isfile()}
            if META_MAT not in members or GROUND_TRUTH not in members:
                raise UserError(f"{path}: no {DEVKIT_DIR}/{META_MAT} or {GROUND_TRUTH} inside; expected {DEVKIT}")
            meta = io.BytesIO(preparing.read_member(tar, members[META_MAT], path, MAX_DEVKIT))
            return meta, preparing.read_member(tar, members[GROUND_TRUTH], path, MAX_DEVKIT).decode()
    except safefs.Refused:
        raise
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a readable tar.gz ({e.__class__.__name__}); expected {DEVKIT}") from None


def devkit_labels(path: Path) -> dict[str, str]:
    """Validation file name -> wnid: line i of the ground truth is the ILSVRC2012_ID of image i, and the
    leaf synsets (num_children == 0) of meta.mat map those IDs to wnids (as torchvision's devkit parser)."""
    meta, truth = _devkit_files(path)
    try:
        synsets = scipy.io.loadmat(meta, squeeze_me=True)["synsets"]
        id_to_wnid = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in synsets if int(s["num_children"]) == 0}
        ids = [int(line) for line in truth.split()]
    except Exception as e:  # scipy/numpy raise many kinds on a malformed file
        raise UserError(f"{path}: unreadable {META_MAT} or {GROUND_TRUTH} ({e.__class__.__name__})") from None
    unknown = sorted(set(ids) - set(id_to_wnid))
    if unknown:
        raise UserError(f"{path}: {GROUND_TRUTH} uses ILSVRC2012_ID {unknown[0]}, not a leaf synset of {META_MAT}")
    for n in sorted(set(ids)):
        safe_id(id_to_wnid[n], f"{path}:{META_MAT}", "class id (WNID)")  # it names a folder under --out
    return {f"ILSVRC2012_val_{i:08d}.JPEG": id_to_wnid[n] for i, n in enumerate(ids, start=1)}


def kaggle_labels(path: Path) -> dict[str, str]:
    """Validation file name -> wnid from Kaggle's LOC_val_solution.csv (first token of PredictionString)."""
    try:
        rows = list(csv.DictReader(io.StringIO(safefs.read_text(path, MAX_DEVKIT), newline="")))
        labels = {row["ImageId"] + ".JPEG": row["PredictionString"].split()[0] for row in rows}
    except safefs.Refused:
        raise
    except (OSError, KeyError, IndexError, AttributeError, csv.Error, UnicodeDecodeError):
        raise UserError(
            f"{path}: unreadable; expected a CSV with columns ImageId,PredictionString (wnid first)"
        ) from None
    if not labels:
        raise UserError(f"{path}: no rows; expected a CSV with columns ImageId,PredictionString (wnid first)")
    for wnid in labels.values():
        safe_id(wnid, path, "class id")  # it names a folder under --out
    return labels


def val_labels(path: Path) -> dict[str, str]:
    return kaggle_labels(path) if path.name == KAGGLE_CSV else devkit_labels(path)


# --- writing the splits --------------------------------------------------------------------------------


def _extract_class_tar(fileobj: Any, name: str, dest: Path) -> int:
    """Extract one per-class tar (streamed) into `dest`, via a temporary sibling made fresh: a class folder
    exists only once complete, so an interrupted run resumes at the next class. Every member is checked by
    preparing.member_path (files and folders only, no link, no `..`), never by tarfile's filter."""
    tmp = dest.with_name(f".{dest.name}.partial")
    safefs.rmtree(tmp)  # inside the private staging folder: what an interrupted run of this user left
    safefs.mkdirs(tmp)
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as inner:
            files = preparing.extract_all(inner, tmp, name, image=_image)  # each image's header checked
    except (tarfile.TarError, EOFError) as e:
        raise UserError(f"{name}: not a readable tar archive ({e.__class__.__name__})") from None
    os.replace(tmp, dest)
    return files


def _link_class(folder: Path, dest: Path, placed: Counter) -> None:
    for path, _ in preparing.children(folder, lambda name, kind: kind == "file" and _image(name)):
        preparing.check_image(path)  # a header, a size: never a 1 GB "JPEG" of zeros placed as verified
        placed[link_or_copy(path, dest / path.name)] += 1


def _image(name: str) -> bool:
    return has_file_allowed_extension(name, IMG_EXTENSIONS)


def write_train(src: Path, dest: Path, show: bool) -> Counter:
    """`dest/<wnid>/*` from the train tar of per-class tars, or a folder of class folders / class tars."""
    placed: Counter = Counter()
    dest.mkdir(exist_ok=True)
    if safefs.is_file(src):
        try:
            with safefs.open_file(src) as f, tarfile.open(fileobj=f) as outer:
                members = [m for m in outer.getmembers() if m.isfile() and m.name.endswith(".tar")]
                for m in _bar(members, "train classes", show):
                    target = dest / safe_id(Path(m.name).stem, f"{src}:{m.name}", "class id")
                    if not target.is_dir():
                        placed["extracted"] += _extract_class_tar(outer.extractfile(m), f"{src}:{m.name}", target)
        except (tarfile.TarError, EOFError) as e:
            raise UserError(
                f"{src}: not a readable tar archive ({e.__class__.__name__}); expected {TRAIN_TAR}"
            ) from None
        if not members:
            raise UserError(f"{src}: no per-class tars (n01440764.tar ...) inside; expected {TRAIN_TAR}")
        return placed
    entries = preparing.children(
        src, lambda name, kind: not name.startswith(".") and (kind == "dir" or name.endswith(".tar"))
    )
    if not entries:
        raise UserError(f"{src}: no class folders <wnid>/ or class tars <wnid>.tar; expected training images")
    for entry, kind in _bar(entries, "train classes", show):
        safe_id(entry.stem if kind == "file" else entry.name, entry, "class id")
        if kind == "dir":
            _link_class(entry, dest / entry.name, placed)
        elif not (dest / entry.stem).is_dir():
            with safefs.open_file(entry) as f:
                placed["extracted"] += _extract_class_tar(f, str(entry), dest / entry.stem)
    return placed


def write_val(src: Path, dest: Path, labels: dict[str, str], labels_file: Path, show: bool) -> Counter:
    """`dest/<wnid>/ILSVRC2012_val_*.JPEG` from the flat val tar or folder, sorted by `labels`."""
    placed: Counter = Counter()
    seen: set[str] = set()

    def target(name: str, where: str) -> Path:
        if name not in labels:
            raise UserError(f"{where}: no label for {name} in {labels_file}")
        seen.add(name)
        return dest / labels[name] / name

    if safefs.is_file(src):
        try:
            job = preparing.Extraction(src)
            with safefs.open_file(src) as f, tarfile.open(fileobj=f) as tar:
                for m in _bar(tar, "val images", show, total=len(labels)):
                    name = Path(m.name).name
                    if not (m.isfile() and VAL_IMAGE.fullmatch(name)):
                        continue
                    out = target(name, str(src))
                    if out.exists():  # an interrupted run got this far
                        placed["exists"] += 1
                        continue
                    preparing.extract_image(tar, m, dest, f"{labels[name]}/{name}", job)
                    placed["extracted"] += 1
        except (tarfile.TarError, EOFError) as e:
            raise UserError(f"{src}: not a readable tar archive ({e.__class__.__name__}); expected {VAL_TAR}") from None
    else:
        files = preparing.children(src, lambda name, kind: kind == "file" and bool(VAL_IMAGE.fullmatch(name)))
        for path, _ in _bar(files, "val images", show):
            preparing.check_image(path)
            placed[link_or_copy(path, target(path.name, str(path)))] += 1
    absent = sorted(set(labels) - seen)
    if absent:
        raise UserError(f"{src}: no {absent[0]} (+{len(absent) - 1} more) of the images {labels_file} labels")
    return placed


# --- checking and indexing -----------------------------------------------------------------------------


def _classes(folder: Path) -> set[str]:
    return {e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith(".")}


def check_classes(stage: Path, sources: dict[str, Path]) -> list[str]:
    """Both splits hold the same wnids; one line naming the first one missing from either."""
    train, val = _classes(stage / "train"), _classes(stage / "val")
    if train - val:
        wnid = sorted(train - val)[0]
        raise UserError(
            f"{sources['validation labels']}: no validation image of class {wnid} "
            f"(which has training images in {sources['training images']}); both splits need the same classes"
        )
    if val - train:
        wnid = sorted(val - train)[0]
        raise UserError(
            f"{sources['training images']}: no class {wnid} (which {sources['validation labels']} gives "
            "validation images); both splits need the same classes"
        )
    return check_layout(stage)  # the task's own check (ImageFolder layout, no empty class folder)


def write_index(stage: Path, classes: list[str]) -> dict[str, int]:
    """index.csv: split, path relative to the prepared folder, class index, in ImageFolder's order."""
    class_to_idx = {c: i for i, c in enumerate(classes)}
    counts = {}
    with safefs.writer(stage / INDEX, text=True) as f:
        w = csv.writer(f)
        w.writerow(["split", "path", "class_index"])
        for split in ("train", "val"):
            items = make_dataset(str(stage / split), class_to_idx, extensions=IMG_EXTENSIONS)
            w.writerows((split, os.path.relpath(path, stage), idx) for path, idx in items)
            counts[split] = len(items)
    return counts


def _expect(what: str, got: int, want: int | None, where: Path) -> None:
    if want is not None and got != want:
        raise UserError(f"{where}: {got} {what}, expected {want}")


@preparing.confining
def prepare(
    source: Path,
    out: Path,
    *,
    progress: bool = True,
    expect_classes: int | None = None,
    expect_train: int | None = None,
    expect_val: int | None = None,
) -> dict[str, Any]:
    """Write the ImageFolder tree and index under `out` from the ILSVRC2012 files in `source`, check it,
    return the summary (the PREPARED.json record when `out` is already prepared). The paper's set has
    expect_classes=1000, expect_train=1281167, expect_val=50000."""
    record = prepared(out, TASK)
    if record is not None:
        return record
    sources = find_sources(source)
    labels_file = sources["validation labels"]
    labels = val_labels(labels_file)
    with staged(out, TASK, source) as stage:
        placed = write_train(sources["training images"], stage / "train", progress)
        placed += write_val(sources["validation images"], stage / "val", labels, labels_file, progress)
        classes = check_classes(stage, sources)
        counts = write_index(stage, classes)
        _expect("classes", len(classes), expect_classes, Path(source))
        _expect("training images", counts["train"], expect_train, sources["training images"])
        _expect("validation images", counts["val"], expect_val, sources["validation images"])
        size = folder_bytes(stage)
        summary = {
            "images": counts,
            "classes": len(classes),
            "bytes": size,
            "size": human_bytes(size),
            "placed": dict(placed),
            "labels": labels_file.name,
            "index": INDEX,
            "layout": "train/<wnid>/*.JPEG, val/<wnid>/*.JPEG (ImageFolder)",
        }
        finish(stage, TASK, Path(source), summary)
    return prepared(out) or summary

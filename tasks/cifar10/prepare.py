"""`prepare cifar10`: CIFAR-10 as published (`cifar-10-python.tar.gz`, or the `cifar-10-batches-py/` folder
it extracts to, or that folder's parent) into `<out>/cifar-10-batches-py/`, the layout torchvision's
CIFAR10 (and so this task) reads.

Checksums are torchvision's: `CIFAR10.tgz_md5` for the archive and the md5s in `CIFAR10.train_list`,
`test_list` and `meta` for the pickles, checked with torchvision's `check_integrity`. `verify_md5=False`
accepts files in the same format that are not the official ones (the tiny preset's, a re-pickled copy).
An archive is extracted (tarfile, filter="data"); the batch files of an extracted folder are hard-linked. The pickles
are read by bench.core.safepickle (numpy arrays and plain containers only): a crafted batch is refused, never run.
"""

from __future__ import annotations

import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

from torchvision.datasets import CIFAR10
from torchvision.datasets.utils import check_integrity

from bench.core import safefs
from bench.core.errors import UserError
from tasks import preparing
from tasks.preparing import finish, folder_bytes, human_bytes, link_or_copy, prepared, staged
from tasks.presets.cifar10 import PRESETS

from . import data

TASK = "cifar10"
ARCHIVE = CIFAR10.filename  # cifar-10-python.tar.gz
NEEDED = data.TRAIN_FILES + data.TEST_FILES + [data.META_FILE]
MODEL_CLASSES = int(PRESETS["paper"]["model"]["num_classes"])  # what a run's model has, unless --set otherwise
SOURCES = f"{ARCHIVE}, its extracted {data.BASE_FOLDER}/ folder, or the folder holding either"


def find_source(source: Path) -> Path:
    """The archive or the `cifar-10-batches-py` folder that `source` names or holds."""
    source = Path(source)
    if source.is_file():
        return source
    folder = data.resolve_root(source) / data.BASE_FOLDER
    if folder.is_dir():
        return folder
    if preparing.exists(source / ARCHIVE):  # a link or a FIFO there is refused when it is read
        return source / ARCHIVE
    raise UserError(f"{source}: no {ARCHIVE} and no {data.BASE_FOLDER}/ folder; expected {SOURCES}")


def extract(archive: Path, dest: Path, verify_md5: bool, show: bool) -> Counter:
    """Check the archive (md5, members) and extract its `cifar-10-batches-py/` files into `dest`."""
    preparing.regular(archive)  # a link below --source is refused, not read
    if verify_md5 and not check_integrity(str(archive), CIFAR10.tgz_md5):
        raise UserError(
            f"{archive}: md5 differs from the official {ARCHIVE} ({CIFAR10.tgz_md5}); "
            "re-download it, or pass verify_md5=False to accept other files in this format"
        )
    try:
        with safefs.open_file(archive) as f, tarfile.open(fileobj=f) as tar:
            members = [m for m in tar.getmembers() if m.name.split("/")[0] == data.BASE_FOLDER and m.isfile()]
            names = {m.name.split("/", 1)[-1] for m in members}
            missing = [n for n in NEEDED if n not in names]
            if missing:
                raise UserError(f"{archive}: no {data.BASE_FOLDER}/{', '.join(missing)} inside; expected {SOURCES}")
            job = preparing.Extraction(archive)
            for m in preparing.progress(members, f"extract {archive.name}") if show else members:
                preparing.extract_member(tar, m, dest, None, job)
    except safefs.Refused:
        raise
    except (tarfile.TarError, EOFError, OSError) as e:
        raise UserError(f"{archive}: not a readable tar archive ({e.__class__.__name__}); expected {SOURCES}") from None
    return Counter(extracted=len(members))


def link(folder: Path, dest: Path, verify_md5: bool) -> Counter:
    """Check the source pickles where they are (so errors name them), then link them: the batches and the meta
    file only, never whatever else sits in the folder (a link there to a private file would be copied into
    --out, where the prepared set may be shared). A needed file that is a link is refused, not placed."""
    for name in NEEDED:
        if preparing.exists(folder / name):
            preparing.regular(folder / name)
    data.check_files(folder, verify_md5)
    placed: Counter = Counter()
    for name in NEEDED:
        placed[link_or_copy(folder / name, dest / data.BASE_FOLDER / name)] += 1
    return placed


@preparing.confining
def prepare(
    source: Path, out: Path, *, progress: bool = True, verify_md5: bool = True, num_classes: int = MODEL_CLASSES
) -> dict[str, Any]:
    """Write `<out>/cifar-10-batches-py/` from `source`, verify it with the task's reader, return the summary
    (the PREPARED.json record when `out` is already prepared). Its labels must lie within the meta's names
    and fit a model of `num_classes` outputs (the presets' model.num_classes), as a run checks them."""
    record = prepared(out, TASK)
    if record is not None:
        return record
    found = find_source(source)
    with staged(out, TASK, source) as stage:
        if not safefs.is_dir(found):  # an archive (a link or FIFO in its place is refused when read)
            placed = extract(found, stage, verify_md5, progress)
        else:
            placed = link(found, stage, verify_md5)
        data.check_files(stage, verify_md5)
        train = data.load_split(stage, train=True, verify_md5=verify_md5)
        test = data.load_split(stage, train=False, verify_md5=verify_md5)
        for split in (train, test):
            data.check_model_classes(split, int(num_classes), stage)
        size = folder_bytes(stage)
        summary = {
            "images": {"train": len(train.data), "test": len(test.data)},
            "classes": len(train.classes),
            "bytes": size,
            "size": human_bytes(size),
            "placed": dict(placed),
            "verified_md5": verify_md5,
            "layout": f"{data.BASE_FOLDER}/ (torchvision CIFAR10)",
        }
        finish(stage, TASK, found, summary)
    return prepared(out) or summary

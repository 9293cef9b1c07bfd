"""`prepare` follows no link below its source folder (tasks.preparing, bench.core.safefs): a colleague's link
where prepare reads a file or a folder of the data set (a class folder, an image, a batch, a transcript
folder, a text file, an archive) is refused in one line naming it, and the private file it points to
(a valid copy of the data, so following it would have "worked") never lands in --out, hard-linked,
copied or encoded; a FIFO there is refused at once, never waited on. The source folder itself may be a
link (a data set in a shared store), and prepares as the real folder does: the control."""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.core.errors import UserError
from tasks.cifar10.prepare import prepare as prepare_cifar10
from tasks.cifar10.tiny import write_tiny as write_tiny_cifar
from tasks.imagenet.prepare import prepare as prepare_imagenet
from tasks.speech.prepare import prepare as prepare_speech
from tasks.speech.tiny import write_tiny as write_speech
from tasks.transformer.prepare import prepare as prepare_text
from tasks.yolo.prepare import prepare as prepare_yolo
from tests.sources import SYNSETS, val_truth, wmt_raw, write_imagenet_kaggle, write_vocdevkit

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(300)]
KAGGLE = "ILSVRC/Data/CLS-LOC"


def _cifar(src: Path) -> None:
    write_tiny_cifar(src)


def _cifar_archive(src: Path) -> None:
    folder = write_tiny_cifar(src / "tmp")
    src.mkdir(exist_ok=True)
    with tarfile.open(src / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname="cifar-10-batches-py/")
    shutil.rmtree(src / "tmp")


def _imagenet(src: Path) -> None:
    write_imagenet_kaggle(src, val_truth())


def _speech(src: Path) -> None:
    write_speech(src / "LibriSpeech")


def _text(src: Path) -> None:
    wmt_raw(src)


def _voc(src: Path) -> None:
    write_vocdevkit(src, years=("2007",))


TASKS: dict[str, tuple[Callable[[Path], None], Callable[..., dict], dict]] = {
    "cifar10": (_cifar, prepare_cifar10, {"verify_md5": False}),
    "cifar10-archive": (_cifar_archive, prepare_cifar10, {"verify_md5": False}),
    "imagenet": (_imagenet, prepare_imagenet, {}),
    "speech": (_speech, prepare_speech, {"splits": "dev-clean"}),
    "transformer": (_text, prepare_text, {"vocab_size": 40, "hard_vocab_limit": False}),
    "yolo": (_voc, prepare_yolo, {"years": ("2007",)}),
}
WNID = SYNSETS[0][1]
CASES = [  # (task, a path below the source that prepare reads; a folder ends in /)
    ("cifar10", "cifar-10-batches-py/data_batch_1"),
    ("cifar10", "cifar-10-batches-py/batches.meta"),
    ("cifar10", "cifar-10-batches-py/"),
    ("cifar10-archive", "cifar-10-python.tar.gz"),
    ("imagenet", f"{KAGGLE}/train/{WNID}/"),
    ("imagenet", f"{KAGGLE}/train/{WNID}/{WNID}_1.JPEG"),
    ("imagenet", f"{KAGGLE}/val/ILSVRC2012_val_00000001.JPEG"),
    ("imagenet", "LOC_val_solution.csv"),
    ("imagenet", "ILSVRC/"),
    ("speech", "LibriSpeech/dev-clean/"),
    ("speech", "SPEAKER/"),  # the first speaker folder of dev-clean
    ("speech", "FLAC"),  # a flac of it
    ("transformer", "train.de"),
    ("transformer", "newstest2014.en"),
    ("yolo", "VOCdevkit/VOC2007/JPEGImages/000001.jpg"),
    ("yolo", "VOCdevkit/VOC2007/Annotations/000001.xml"),
    ("yolo", "VOCdevkit/VOC2007/ImageSets/Main/train.txt"),
]


PLANTS = [(plant, task, rel) for task, rel in CASES for plant in ("link", "fifo") if plant == "link" or rel[-1] != "/"]


def _resolve(src: Path, rel: str) -> Path:
    rel = rel.rstrip("/")
    if rel in ("SPEAKER", "FLAC"):
        speaker = sorted((src / "LibriSpeech" / "dev-clean").iterdir())[0]
        return speaker if rel == "SPEAKER" else sorted(speaker.rglob("*.flac"))[0]
    return src / rel


def _marked(out: Path, private: Path) -> list[str]:
    """Files under `out` that are the private file (a hard link to it) or hold its bytes."""
    if not out.exists():
        return []
    files = [private] if private.is_file() else sorted(p for p in private.rglob("*") if p.is_file())
    ids = {(f.stat().st_dev, f.stat().st_ino) for f in files}
    found = []
    for p in out.rglob("*"):
        if p.is_file() and ((p.stat().st_dev, p.stat().st_ino) in ids or p.resolve().is_relative_to(private)):
            found.append(str(p))
    return found


@pytest.mark.parametrize(("plant", "task", "rel"), PLANTS, ids=[f"{p}-{t}:{r}" for p, t, r in PLANTS])
def test_a_link_or_fifo_below_the_source_is_refused(tmp_path: Path, task: str, rel: str, plant: str) -> None:
    make, prepare, options = TASKS[task]
    src, out = tmp_path / "src", tmp_path / "out"
    make(src)
    victim = _resolve(src, rel)
    private = tmp_path / "private" / victim.name
    private.parent.mkdir()
    if plant == "link":  # the colleague's link, to a valid copy of the data kept private
        shutil.move(victim, private)
        victim.symlink_to(private, target_is_directory=private.is_dir())
    else:  # a FIFO where a file is read
        victim.unlink()
        os.mkfifo(victim)
    with pytest.raises(UserError) as e:
        prepare(src, out, progress=False, **options)
    message = str(e.value)
    assert "\n" not in message and str(victim) in message, message
    assert ("symbolic link" if plant == "link" else "FIFO") in message, message
    assert _marked(out, private) == []


@pytest.mark.parametrize("task", ["cifar10", "transformer", "yolo"])
def test_a_source_folder_that_is_itself_a_link_prepares(tmp_path: Path, task: str) -> None:
    """The data set in a shared store, reached through a link the user names as --source: taken as named."""
    make, prepare, options = TASKS[task]
    store, src, out = tmp_path / "store", tmp_path / "src", tmp_path / "out"
    make(store)
    src.symlink_to(store, target_is_directory=True)
    record = prepare(src, out, progress=False, **options)
    assert record["task"] if "task" in record else record
    assert (out / "PREPARED.json").is_file()

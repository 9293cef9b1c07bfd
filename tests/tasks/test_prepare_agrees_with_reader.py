"""`prepare` checks with the decoder and the bounds the task reads with (issue 59.6b): a source `prepare`
accepts, `run` reads. Each case drives the real CLI over a source in its publisher's format, damaged the way
a reader would find and a header check would not: a JPEG cut after its header (a run's "image file is
truncated"), a CIFAR-10 meta of 11 classes (a run's "Target 10 is out of bounds"), a VOC <size> that is not
its image's, a FLAC cut after its header. Each refusal is one line naming the file; the undamaged source
prepares."""

from __future__ import annotations

import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tasks.cifar10.tiny import write_tiny as write_tiny_cifar
from tasks.speech.tiny import write_tiny as write_speech
from tests.sources import SYNSETS, val_truth, voc_xml, write_imagenet_kaggle, write_vocdevkit
from tests.tasks.test_prepare_damaged_values import VOC_XML, prepares, refused

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(120)]
WNID = SYNSETS[0][1]


def _cut(path: Path) -> None:
    """`path` cut after its header and the first scan bytes: PIL reads its size, a run cannot decode it."""
    data = path.read_bytes()
    sos = data.index(b"\xff\xda")  # start of scan: every header segment comes before it
    path.write_bytes(data[: sos + 40])


def test_a_truncated_imagenet_jpeg_is_refused(tmp_path: Path, capsys) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_kaggle(src, val_truth())
    prepares(capsys, "imagenet", src, out)
    jpg = src / "ILSVRC/Data/CLS-LOC" / f"train/{WNID}/{WNID}_1.JPEG"
    _cut(jpg)
    assert "truncated" in refused(capsys, "imagenet", src, out, jpg)


def test_a_truncated_voc_jpeg_is_refused(tmp_path: Path, capsys) -> None:
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    prepares(capsys, "yolo", devkit, out)
    jpg = devkit / "VOC2007" / "JPEGImages" / "000002.jpg"
    _cut(jpg)
    assert "truncated" in refused(capsys, "yolo", devkit, out, jpg)


@pytest.mark.parametrize(
    ("size", "box"),
    [((128, 96), (5, 5, 100, 20)), ((128, 96), (5, 5, 20, 20))],
    ids=["box inside <size>, past the image", "<size> not the image's"],
)
def test_voc_boxes_are_checked_against_the_decoded_image(tmp_path: Path, capsys, size, box) -> None:
    """write_vocdevkit's JPEGs are 64 × 48; a <size> of 128 × 96 would pass a box past the image, or scale
    every label by the wrong width."""
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    xml = devkit / VOC_XML
    xml.write_text(voc_xml("2008_000003", *size, [("person", 0, *box)]))
    assert "64 × 48" in refused(capsys, "yolo", devkit, out, xml)


def _cifar_with_classes(folder: Path, classes: int) -> Path:
    """The tiny CIFAR-10 pickles with a meta of `classes` names and the first label of every batch
    `classes - 1`: in range of the meta, past a 10-output model when classes > 10."""
    batches = write_tiny_cifar(folder)
    (batches / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(classes)]}))
    for name in ("data_batch_1", "test_batch"):
        entry = pickle.loads((batches / name).read_bytes())  # the test's own file
        entry["labels"][0] = classes - 1
        (batches / name).write_bytes(pickle.dumps(entry))
    archive = folder.parent / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in sorted(batches.iterdir()):
            tar.add(f, arcname=f"cifar-10-batches-py/{f.name}")
    return archive


def test_a_cifar_meta_of_11_classes_is_refused_by_prepare(tmp_path: Path, capsys) -> None:
    ten = _cifar_with_classes(tmp_path / "ten" / "pickles", 10)
    prepares(capsys, "cifar10", ten, tmp_path / "out", "verify_md5=false")
    archive = _cifar_with_classes(tmp_path / "eleven" / "pickles", 11)
    line = refused(capsys, "cifar10", archive, tmp_path / "out", "batches.meta", "verify_md5=false")
    assert "11 classes" in line and "10 outputs" in line, line
    prepares(capsys, "cifar10", archive, tmp_path / "out", "verify_md5=false", "num_classes=11")


def test_a_run_on_cifar_of_11_classes_is_one_line(tmp_path: Path, capsys) -> None:
    """A folder prepared elsewhere (or before this check): `run` refuses it before training, in one line."""
    from bench.cli import main

    _cifar_with_classes(tmp_path / "data", 11)
    args = ["run", "--task", "cifar10", "--method", "adascale", "--scale", "2", "--data-root", str(tmp_path / "data")]
    assert main([*args, "--out", str(tmp_path / "runs"), "--set", "T1=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batches.meta" in err[0] and "10 outputs" in err[0], err
    assert np.all([not p.name.endswith(".pt") for p in (tmp_path / "runs").rglob("*")])


def test_a_truncated_flac_is_refused(tmp_path: Path, capsys) -> None:
    """soundfile reads a cut FLAC's header (its frame count) and loses sync decoding it: a run's
    `load_audio` error, mid-run, unless prepare decodes every frame first."""
    src, out = tmp_path / "src", tmp_path / "out"
    write_speech(src / "LibriSpeech")
    prepares(capsys, "speech", src, out)
    flac = sorted((src / "LibriSpeech").rglob("*.flac"))[1]
    flac.write_bytes(flac.read_bytes()[: flac.stat().st_size // 3])
    assert "not readable audio" in refused(capsys, "speech", src, out, flac)

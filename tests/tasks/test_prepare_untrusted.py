"""`prepare` trusts nothing it reads: ids from input files never form a path outside --out (refused in one
line naming the file and the id), numbers and options are checked (one line, not a traceback, and no
staging folder left), two prepares into one --out exclude each other, and a staging folder from another
source is started over, never mixed."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tasks.imagenet import prepare as imagenet_prepare
from tasks.imagenet.prepare import prepare as prepare_imagenet
from tasks.speech.prepare import prepare as prepare_speech
from tasks.speech.tiny import write_tiny as write_speech
from tasks.transformer.prepare import prepare as prepare_text
from tasks.yolo.prepare import prepare as prepare_yolo
from tests.sources import (
    SYNSETS,
    val_truth,
    write_devkit,
    write_imagenet_archives,
    write_imagenet_kaggle,
    write_vocdevkit,
)
from tests.tasks.test_prepare_images import fails, nothing_left, snapshot

pytestmark = pytest.mark.usefixtures("one_thread")
ESCAPES = ["../../escaped", "/tmp/adascale-escaped", "..", "n01/../../x"]


def outside(tmp_path: Path) -> list[str]:
    """Everything under tmp_path's parent that a prepare should not have made (outside tmp_path/out)."""
    names = ["escaped", "x"]
    return [str(p) for n in names for p in (tmp_path.parent / n, tmp_path / n, Path("/tmp/adascale-escaped"))
            if p.exists()]  # fmt: skip


@pytest.mark.parametrize("wnid", ESCAPES)
def test_imagenet_kaggle_class_id_cannot_leave_out(tmp_path: Path, wnid: str) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    truth = val_truth()
    write_imagenet_kaggle(src, truth)
    csv = src / "LOC_val_solution.csv"
    lines = csv.read_text().splitlines()
    first = lines[1].split(",")[1].split()[0]
    lines[1] = lines[1].replace(first, wnid, 1)
    csv.write_text("\n".join(lines) + "\n")
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert str(csv) in msg and repr(wnid) in msg and "refused" in msg
    nothing_left(out)
    assert outside(tmp_path) == []


def test_imagenet_devkit_class_id_cannot_leave_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_archives(src)
    monkeypatch.setattr("tests.sources.SYNSETS", [(1, "../../escaped"), *SYNSETS[1:]])
    write_devkit(src / "ILSVRC2012_devkit_t12.tar.gz", val_truth())
    msg = fails(prepare_imagenet, src, out, progress=False)
    assert "ILSVRC2012_devkit_t12.tar.gz" in msg and "'../../escaped'" in msg
    nothing_left(out)
    assert outside(tmp_path) == []


@pytest.mark.parametrize("image_id", ["../../escaped", "/tmp/adascale-escaped", ".."])
def test_voc_image_id_cannot_leave_out(tmp_path: Path, image_id: str) -> None:
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    listing = devkit / "VOC2012" / "ImageSets" / "Main" / "train.txt"
    listing.write_text(listing.read_text() + image_id + "\n")
    msg = fails(prepare_yolo, devkit, out, progress=False)
    assert msg.startswith(str(listing)) and repr(image_id) in msg
    nothing_left(out)
    assert outside(tmp_path) == []


def test_voc_numbers_as_written_by_hand(tmp_path: Path) -> None:
    """<width>64.0</width> is 64 pixels; <difficult>no</difficult> and a fractional width are one line
    naming the file, and no staging folder stays."""
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    xml = devkit / "VOC2012" / "Annotations" / "2008_000003.xml"
    good = xml.read_text()
    xml.write_text(good.replace("<difficult>0</difficult>", "<difficult>no</difficult>", 1))
    msg = fails(prepare_yolo, devkit, out, progress=False)
    assert msg.startswith(str(xml)) and "'no'" in msg
    nothing_left(out)
    xml.write_text(good.replace("<width>64</width>", "<width>64.5</width>"))
    assert fails(prepare_yolo, devkit, out, progress=False).startswith(str(xml))
    nothing_left(out)
    xml.write_text(good.replace("<width>64</width>", "<width>64.0</width>"))
    prepare_yolo(devkit, tmp_path / "float", progress=False)
    ref = tmp_path / "ref"
    xml.write_text(good)
    prepare_yolo(devkit, ref, progress=False)
    label = "labels/train2012/2008_000003.txt"
    assert (tmp_path / "float" / label).read_text() == (ref / label).read_text()


def test_prepare_options_are_checked(tmp_path: Path) -> None:
    devkit, out = write_vocdevkit(tmp_path / "src", years=("2007",)), tmp_path / "out"
    assert prepare_yolo(devkit, out, progress=False, years=2007)["years"] == ["2007"]  # --set years=2007
    assert "years" in fails(prepare_yolo, devkit, tmp_path / "o2", progress=False, years="1999")
    for bad in ({"vocab_size": "abc"}, {"character_coverage": 2}, {"src": "../en"}, {"threads": 0}):
        msg = fails(prepare_text, tmp_path, tmp_path / "o3", progress=False, **bad)
        assert next(iter(bad)) in msg
        nothing_left(tmp_path / "o3")


def test_librispeech_transcript_that_is_not_utf8(tmp_path: Path) -> None:
    write_speech(tmp_path / "src" / "LibriSpeech")
    trans = sorted((tmp_path / "src" / "LibriSpeech" / "dev-clean").glob("*/*/*.trans.txt"))[0]
    trans.write_bytes(trans.read_bytes().replace(b" ", b" \xff", 1))
    out = tmp_path / "out"
    msg = fails(prepare_speech, tmp_path / "src", out, progress=False)
    assert trans.name in msg and "UTF-8" in msg
    nothing_left(out)


def test_librispeech_member_path_cannot_leave_out(tmp_path: Path) -> None:
    write_speech(tmp_path / "corpus" / "LibriSpeech")
    (tmp_path / "src").mkdir()
    tarball = tmp_path / "src" / "dev-clean.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "corpus" / "LibriSpeech" / "dev-clean", arcname="LibriSpeech/dev-clean")
        tar.add(
            tmp_path / "corpus" / "LibriSpeech" / "dev-clean", arcname="LibriSpeech/.."
        )  # LibriSpeech/../<speaker>/<chapter>/<file>
    out = tmp_path / "out"
    msg = fails(prepare_speech, tmp_path / "src", out, progress=False)
    assert str(tarball) in msg and "'..'" in msg
    nothing_left(out)
    assert outside(tmp_path) == []


def test_two_prepares_into_one_out_exclude_each_other(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_archives(src)
    code = (
        "import sys, time\nfrom bench.core.locks import file_lock\n"
        f"with file_lock({str(tmp_path / '.out.lock')!r}, 'x'):\n    print('held', flush=True)\n    time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        msg = fails(prepare_imagenet, src, out, progress=False)
        assert str(out) in msg and "in use" in msg and f"pid {holder.pid}" in msg
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert prepare_imagenet(src, out, progress=False)["classes"] == len(SYNSETS)  # free again: fine


def test_rerun_with_another_source_starts_clean(tmp_path: Path, monkeypatch, capsys) -> None:
    """A prepare from archives stopped after its training images; the rerun from a Kaggle folder must not
    keep the first source's files (every image is linked from the second source, none 'exists')."""
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "out"
    write_imagenet_archives(first)
    write_imagenet_kaggle(second, val_truth())

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(imagenet_prepare, "write_val", stop)
        with pytest.raises(KeyboardInterrupt):
            prepare_imagenet(first, out, progress=False)
    assert (tmp_path / ".out.partial" / "train").is_dir()  # the first source's classes, left behind
    summary = prepare_imagenet(second, out, progress=False)
    assert "exists" not in summary["placed"] and "extracted" not in summary["placed"]
    assert "another source" in capsys.readouterr().err
    kaggle = second / "ILSVRC" / "Data" / "CLS-LOC" / "train"
    for f in (out / "train").rglob("*.JPEG"):
        assert f.read_bytes() == (kaggle / f.parent.name / f.name).read_bytes()
    assert snapshot(out)  # a prepared folder


def test_rerun_with_the_same_source_resumes(tmp_path: Path, monkeypatch) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_archives(src)
    with monkeypatch.context() as m:
        m.setattr(imagenet_prepare, "write_val", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            prepare_imagenet(src, out, progress=False)
    summary = prepare_imagenet(src, out, progress=False)
    assert summary["placed"] == {"extracted": len(val_truth())}  # the training classes were kept


def test_an_archive_member_read_into_memory_is_bounded_before_it_is_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The devkit's members were read whole: a 3 MB .tar.gz of a 3 GB meta.mat was a MemoryError. Every member
    read into memory goes through preparing.read_member: one that claims more than its bound is refused in one
    line naming the archive and the member, before a byte of it is inflated (the bound lowered: 32 MB of zeros
    against 1 MB, the peak of what prepare holds measured)."""
    import tracemalloc

    from bench.cli import main
    from tests.sources import tar_add

    src, out = tmp_path / "src", tmp_path / "out"
    write_imagenet_archives(src)
    devkit = src / "ILSVRC2012_devkit_t12.tar.gz"
    with tarfile.open(devkit, "w:gz") as tar:
        tar_add(tar, "ILSVRC2012_devkit_t12/data/meta.mat", bytes(32 << 20))
        tar_add(tar, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", b"1\n")
    monkeypatch.setattr(imagenet_prepare, "MAX_DEVKIT", 1 << 20)
    tracemalloc.start()
    try:
        rc = main(["prepare", "imagenet", "--source", str(src), "--out", str(out)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(devkit) in err and "meta.mat" in err and "claims" in err, err
    assert peak < 16 << 20, peak
    nothing_left(out)

"""Damaged or crafted values inside a source's files (issue 42): `prepare` checks each value before it calls
the data verified, and a bad one is one line on stderr naming the file, exit status 2, and nothing left at
--out (no PREPARED.json, no staging folder). Each class: fairseq token ids and index pointers, VOC boxes,
image headers, line lengths. Every source is written in its publisher's on-disk format (tests.sources), and
the undamaged one prepares."""

from __future__ import annotations

import io
import struct
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.cli import main
from bench.core import safefs
from tasks.preparing import MARKER
from tasks.speech.data import MAX_TRANSCRIPT_LINE
from tasks.speech.tiny import write_tiny as write_speech
from tasks.transformer.indexed import HEADER_BYTES, MMapIndexedDataset, write_indexed
from tasks.transformer.tiny import tiny_pairs, write_binarized
from tests.sources import (
    SYNSETS,
    tar_add,
    val_truth,
    voc_xml,
    wmt_raw,
    write_imagenet_archives,
    write_imagenet_kaggle,
    write_vocdevkit,
)

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.timeout(120)]
SPM = ("vocab_size=64", "hard_vocab_limit=false")  # the toy corpus has fewer pieces than the default 32000


def prepare(task: str, source: Path, out: Path, *options: str) -> int:
    sets = [arg for option in options for arg in ("--set", option)]
    return main(["prepare", task, "--source", str(source), "--out", str(out), *sets])


def refused(
    capsys: pytest.CaptureFixture[str], task: str, source: Path, out: Path, named: Path | str, *options: str
) -> str:
    """The one stderr line of a prepare that refuses `source`, naming `named`; nothing left behind."""
    assert prepare(task, source, out, *options) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("adascale-bench: error: ") and str(named) in lines[0], lines[0]
    assert not out.exists() and not (out.parent / f".{out.name}.partial").exists()
    assert not list(out.parent.rglob(MARKER))
    return lines[0]


def prepares(capsys: pytest.CaptureFixture[str], task: str, source: Path, out: Path, *options: str) -> None:
    assert prepare(task, source, out, *options) == 0, capsys.readouterr().err
    assert (out / MARKER).is_file()
    safefs.rmtree(out)
    capsys.readouterr()


# ---------------------------------------------------------------- fairseq binarised data (transformer)


def _tokens(prefix: Path, dtype: type, change: Callable[[list[list[int]]], None]) -> None:
    """Rewrite the indexed data at `prefix` in `dtype` (as fairseq-preprocess would write it) after `change`."""
    ds = MMapIndexedDataset(prefix)
    seqs = [ds[i].tolist() for i in range(len(ds))]
    change(seqs)
    write_indexed(prefix, seqs, dtype)


def _index(prefix: Path, field: str, seq: int, value: int) -> None:
    """Overwrite sequence `seq`'s size (int32) or pointer (int64) in `prefix`.idx, in place."""
    idx = Path(f"{prefix}.idx")
    data = bytearray(idx.read_bytes())
    (n,) = struct.unpack("<Q", data[HEADER_BYTES - 8 : HEADER_BYTES])
    at, fmt = (HEADER_BYTES + 4 * seq, "<i") if field == "size" else (HEADER_BYTES + 4 * n + 8 * seq, "<q")
    data[at : at + struct.calcsize(fmt)] = struct.pack(fmt, value)
    idx.write_bytes(bytes(data))


def _set(seqs: list[list[int]], value: int) -> None:
    seqs[7][1] = value


FAIRSEQ_DAMAGE: dict[str, Callable[[Path], None]] = {
    "token id -5": lambda p: _tokens(p, np.int32, lambda s: _set(s, -5)),
    "pointer 1 TB past the end": lambda p: _index(p, "pointer", 3, 1 << 40),
    "negative size": lambda p: _index(p, "size", 3, -5),
    "pointers out of order": lambda p: _index(p, "pointer", 3, 0),
    "size past the end": lambda p: _index(p, "size", 3, 1 << 30),
}


@pytest.mark.parametrize("damage", list(FAIRSEQ_DAMAGE))
def test_fairseq_token_ids_and_index_are_checked(tmp_path: Path, capsys, damage: str) -> None:
    src, out = tmp_path / "fairseq", tmp_path / "out"
    write_binarized(src, tiny_pairs(0))
    prepares(capsys, "transformer", src, out)
    prefix = src / "valid.en-de.de"
    FAIRSEQ_DAMAGE[damage](prefix)
    line = refused(capsys, "transformer", src, out, prefix)
    assert ("token id -5" in line) == (damage == "token id -5"), line


def test_a_damaged_prepared_fairseq_folder_is_one_line_on_load(tmp_path: Path) -> None:
    """The task's loader checks a prepared folder's ids too (a folder damaged after prepare)."""
    from bench.core.errors import UserError
    from tasks.transformer import data as D

    write_binarized(tmp_path, tiny_pairs(0))
    _tokens(tmp_path / "test.en-de.en", np.int32, lambda s: _set(s, 1 << 20))
    cfg = {"format": "fairseq", "src": "en", "tgt": "de"}
    with pytest.raises(UserError, match=r"test\.en-de\.en\.bin: token id 1048576"):
        D.load_split(tmp_path, cfg, "test", D.load_vocab(tmp_path, cfg))


# ---------------------------------------------------------------- line lengths


def _long_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def test_a_wmt_line_past_the_limit_is_refused_unread(tmp_path: Path, capsys) -> None:
    src, out = tmp_path / "raw", tmp_path / "out"
    wmt_raw(src)
    for lang in ("en", "de"):  # the pairs still line up: only the length is wrong
        _long_line(src / f"train.{lang}", "wort " * (safefs.MAX_LINE // 5 + 1))
    line = refused(capsys, "transformer", src, out, src / "train.en", *SPM)
    assert f"line {len(tiny_pairs(0)['train']) + 1} is longer than {safefs.MAX_LINE}" in line


def test_a_fairseq_dictionary_line_past_the_limit_is_refused(tmp_path: Path, capsys) -> None:
    src, out = tmp_path / "fairseq", tmp_path / "out"
    write_binarized(src, tiny_pairs(0))
    _long_line(src / "dict.de.txt", "x" * (safefs.MAX_LINE + 1) + " 1")
    assert "is longer than" in refused(capsys, "transformer", src, out, src / "dict.de.txt")


def test_a_fairseq_dictionary_that_is_not_utf8_is_one_line(tmp_path: Path, capsys) -> None:
    """A dictionary line of Latin-1 bytes: one line naming the file (it was a traceback)."""
    src, out = tmp_path / "fairseq", tmp_path / "out"
    write_binarized(src, tiny_pairs(0))
    path = src / "dict.de.txt"
    path.write_bytes(path.read_bytes() + b"caf\xe9 3\n")
    assert "is not UTF-8 text" in refused(capsys, "transformer", src, out, path)


def test_a_transcript_line_past_the_limit_is_refused_unread(tmp_path: Path, capsys) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_speech(src / "LibriSpeech")
    prepares(capsys, "speech", src, out)
    trans = sorted((src / "LibriSpeech" / "dev-clean").glob("*/*/*.trans.txt"))[0]
    lines = trans.read_text().splitlines()
    uid = lines[1].split()[0]
    lines[1] = f"{uid} " + "A " * (MAX_TRANSCRIPT_LINE // 2 + 1)  # a line of real words, only too long
    trans.write_text("\n".join(lines) + "\n")
    assert "line 2 is longer than" in refused(capsys, "speech", src, out, trans)


# ---------------------------------------------------------------- VOC boxes (yolo)

VOC_XML = "VOC2012/Annotations/2008_000003.xml"  # an image of write_vocdevkit's, 64 × 48
VOC_DAMAGE: dict[str, tuple[tuple[float, float], tuple[float, float, float, float]]] = {
    # (width, height) of <size>, then the first object's (xmin, ymin, xmax, ymax)
    "xmin 1e308": ((64, 48), (1e308, 5, 20, 20)),
    "xmin nan": ((64, 48), (float("nan"), 5, 20, 20)),
    "xmin negative": ((64, 48), (-5, 5, 20, 20)),
    "xmin >= xmax": ((64, 48), (30, 5, 10, 20)),
    "ymin >= ymax": ((64, 48), (5, 20, 30, 20)),
    "past the width": ((64, 48), (5, 5, 65, 20)),
    "past the height": ((64, 48), (5, 5, 20, 49)),
    "negative size": ((-64, 48), (5, 5, 20, 20)),
    "huge size": ((10**9, 10**9), (5, 5, 20, 20)),
    "zero size, box past the JPEG": ((0, 0), (5, 5, 100, 20)),
}


@pytest.mark.parametrize("damage", list(VOC_DAMAGE))
def test_voc_boxes_and_sizes_are_checked(tmp_path: Path, capsys, damage: str) -> None:
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    (w, h), box = VOC_DAMAGE[damage]
    xml = devkit / VOC_XML
    xml.write_text(voc_xml("2008_000003", w, h, [("person", 0, *box), ("cat", 0, 1, 1, 9, 9)]))  # type: ignore[arg-type]
    line = refused(capsys, "yolo", devkit, out, xml)
    assert ("object 1 (person)" in line) == ("size" not in damage or "box" in damage), line


def test_a_voc_annotation_without_size_takes_the_checked_jpeg_size(tmp_path: Path, capsys) -> None:
    """A missing <size> is the JPEG header's (ultralytics' script crashes on it), its boxes checked against it."""
    devkit, out = write_vocdevkit(tmp_path / "src"), tmp_path / "out"
    xml = devkit / VOC_XML
    xml.write_text(voc_xml("2008_000003", 64, 48, [("person", 0, 5, 5, 64, 48)]).replace("<width>64</width>", ""))
    prepares(capsys, "yolo", devkit, out)


# ---------------------------------------------------------------- image headers


def _bomb() -> bytes:
    """A valid 8 × 8 PNG whose header claims 100 000 × 100 000 pixels (30 GB decoded), CRC fixed."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG")
    png = bytearray(buf.getvalue())
    png[16:24] = struct.pack(">II", 100_000, 100_000)  # IHDR: signature 8, length 4, type 4, then w, h
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])))
    return bytes(png)


def _replaced(archive: bytes, name: str, payload: Callable[[bytes], bytes]) -> bytes:
    """The tar `archive` with member `name`'s data replaced by payload(its data)."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]  # type: ignore[union-attr]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for n, data in members:
            tar_add(tar, n, payload(data) if n == name else data)
    return out.getvalue()


def _sparse_zeros(path: Path) -> None:
    """`path` made a 1 GB file of zeros (sparse: written in no time, no disk used)."""
    with open(path, "wb") as f:
        f.truncate(1 << 30)


def _imagenet_kaggle(src: Path, rel: str, damage: Callable[[Path], None]) -> str:
    write_imagenet_kaggle(src, val_truth())
    damage(src / "ILSVRC/Data/CLS-LOC" / rel)
    return str(src / "ILSVRC/Data/CLS-LOC" / rel)


def _imagenet_tar(src: Path, tar_name: str, member: str, payload: bytes) -> str:
    write_imagenet_archives(src)
    path = src / tar_name
    if "/" in member:  # a member of a class tar inside the train tar
        outer, inner = member.split("/")
        new = _replaced(path.read_bytes(), outer, lambda data: _replaced(data, inner, lambda _: payload))
    else:
        new = _replaced(path.read_bytes(), member, lambda _: payload)
    path.write_bytes(new)
    return f"{path}:{member.replace('/', ':')}"


WNID = SYNSETS[0][1]
IMAGE_DAMAGE: dict[str, tuple[str, Callable[[Path], str]]] = {
    "folder: 1 GB of zeros": (
        "imagenet",
        lambda src: _imagenet_kaggle(src, f"train/{WNID}/{WNID}_1.JPEG", _sparse_zeros),
    ),
    "folder: PNG bomb": (
        "imagenet",
        lambda src: _imagenet_kaggle(src, "val/ILSVRC2012_val_00000002.JPEG", lambda p: p.write_bytes(_bomb())),
    ),
    "val tar: zeros": (
        "imagenet",
        lambda src: _imagenet_tar(src, "ILSVRC2012_img_val.tar", "ILSVRC2012_val_00000003.JPEG", bytes(4096)),
    ),
    "class tar: JPEG signature, then garbage": (
        "imagenet",
        lambda src: _imagenet_tar(
            src, "ILSVRC2012_img_train.tar", f"{WNID}.tar/{WNID}_2.JPEG", b"\xff\xd8\xff" + bytes(99)
        ),
    ),
    "voc: 1 GB of zeros": (
        "yolo",
        lambda src: str(_voc_jpeg(src, _sparse_zeros)),
    ),
}


def _voc_jpeg(src: Path, damage: Callable[[Path], None]) -> Path:
    jpg = write_vocdevkit(src) / "VOC2007" / "JPEGImages" / "000002.jpg"
    damage(jpg)
    return jpg


@pytest.mark.parametrize("damage", list(IMAGE_DAMAGE))
def test_image_headers_and_sizes_are_checked(tmp_path: Path, capsys, damage: str) -> None:
    task, make = IMAGE_DAMAGE[damage]
    src, out = tmp_path / "src", tmp_path / "out"
    named = make(src)
    line = refused(capsys, task, src, out, named)
    assert "refused" in line, line

"""`prepare` for speech (LibriSpeech tarballs / extraction) and transformer (WMT14 raw text / fairseq output):
tiny inputs in the publishers' formats, the prepared folders, idempotence, bad sources, and short runs."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bench.core.errors import UserError
from bench.core.files import METRICS, read_jsonl
from bench.run.runner import run_dir_of, run_spec
from bench.run.spec import resolve
from tasks import get_task
from tasks.preparing import MARKER
from tasks.speech import data as sdata
from tasks.speech.prepare import prepare as prepare_speech
from tasks.speech.tiny import write_tiny as write_speech
from tasks.transformer import Transformer
from tasks.transformer import data as D
from tasks.transformer.indexed import MMapIndexedDataset, write_indexed
from tasks.transformer.prepare import prepare as prepare_text
from tasks.transformer.tiny import tiny_pairs, write_binarized, write_raw

pytestmark = pytest.mark.usefixtures("one_thread")
SPLITS = ("train-clean-100", "dev-clean")
EXTS = ("bin", "idx")
SPM = {"vocab_size": 64, "hard_vocab_limit": False}  # the toy corpus has fewer pieces than 64


def assert_nothing_left(out: Path) -> None:
    assert not out.exists() and not (out.parent / f".{out.name}.partial").exists()


def bad(call: Callable[[], object], *names: str) -> str:
    """The UserError message of `call()`: one line naming every one of `names`."""
    with pytest.raises(UserError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for name in names:
        assert name in message, message
    return message


# ---------------------------------------------------------------- speech


@pytest.fixture(scope="module")
def libri(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny corpus extracted as LibriSpeech/<split>/..., and as openslr tarballs in tarballs/."""
    base = tmp_path_factory.mktemp("librispeech")
    write_speech(base / "extracted" / "LibriSpeech")
    (base / "tarballs").mkdir()
    for split in SPLITS:
        with tarfile.open(base / "tarballs" / f"{split}.tar.gz", "w:gz") as tar:
            tar.add(base / "extracted" / "LibriSpeech" / split, arcname=f"LibriSpeech/{split}")
    return base


@pytest.fixture(scope="module")
def speech_out(libri: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("speech_prepared") / "out"
    prepare_speech(libri / "tarballs", out)  # with the progress bars (hidden: stderr is not a terminal)
    return out


def test_speech_from_tarballs(libri: Path, speech_out: Path) -> None:
    record = json.loads((speech_out / MARKER).read_text())
    assert record["task"] == "speech" and record["source"] == str((libri / "tarballs").resolve())
    assert record["source_kind"] == "tarballs" and record["sample_rate"] == 8000
    assert record["utterances"] == 192 and record["files"] == {"extracted": 192 + 10}
    assert record["splits"]["train-clean-100"] | {"hours": 0, "bytes": 0} == {
        "utterances": 160,
        "speakers": 4,
        "chapters": 8,
        "hours": 0,
        "bytes": 0,
    }
    assert record["splits"]["dev-clean"]["utterances"] == 32 and record["hours"] > 0
    assert sorted(p.name for p in speech_out.iterdir()) == sorted(
        [MARKER, *SPLITS, *(f"{s}.manifest.tsv" for s in SPLITS)]
    )
    src = libri / "extracted" / "LibriSpeech" / "dev-clean" / "84" / "121123"
    dst = speech_out / "dev-clean" / "84" / "121123"
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in src.iterdir())
    assert (dst / "84-121123-0003.flac").read_bytes() == (src / "84-121123-0003.flac").read_bytes()
    rows = (speech_out / "dev-clean.manifest.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["uid", "path", "num_samples", "sample_rate", "text"] and len(rows) == 33
    uid, path, frames, rate, text = rows[1].split("\t")
    speaker, chapter, _ = uid.split("-")
    assert path == f"dev-clean/{speaker}/{chapter}/{uid}.flac" and rate == "8000" and int(frames) > 0
    trans = speech_out / "dev-clean" / speaker / chapter / f"{speaker}-{chapter}.trans.txt"
    assert f"{uid} {text}" in trans.read_text().splitlines()
    # idempotent: the prepared folder is recognised and left alone
    stamp = (speech_out / MARKER).stat().st_mtime_ns
    assert prepare_speech(libri / "tarballs", speech_out, progress=False) == record
    assert (speech_out / MARKER).stat().st_mtime_ns == stamp
    assert not (speech_out.parent / ".out.partial").exists()


def test_speech_manifest_and_folder_scan_agree(speech_out: Path, tmp_path: Path) -> None:
    for split in SPLITS:
        from_manifest = sdata.read_split(speech_out, split, 8000)
        copy = tmp_path / split
        shutil.copytree(speech_out / split, copy / split, copy_function=os.link)
        scanned = sdata.read_split(copy, split, 8000)  # no manifest there: every flac header is read
        assert [(u.uid, u.path.relative_to(speech_out), u.text, u.num_samples) for u in from_manifest] == [
            (u.uid, u.path.relative_to(copy), u.text, u.num_samples) for u in scanned
        ]
        shutil.copy(speech_out / f"{split}.manifest.tsv", copy)
        assert sdata.read_split(copy, split, 8000) == scanned  # the same Utterance list, paths included
    bad(lambda: sdata.read_split(speech_out, "dev-clean", 16000), "16000 Hz", "174-50561-0000.flac")
    broken = tmp_path / "dev-clean" / "dev-clean.manifest.tsv"
    broken.write_text(broken.read_text().replace("\t8000\t", "\teight\t", 1))
    bad(lambda: sdata.read_split(tmp_path / "dev-clean", "dev-clean", 8000), f"{broken}:2")
    broken.write_text("uid,path\n")
    bad(lambda: sdata.read_split(tmp_path / "dev-clean", "dev-clean", 8000), f"{broken}:1")


def test_speech_from_extracted_folder_links(libri: Path, tmp_path: Path) -> None:
    out = tmp_path / "dev"
    record = prepare_speech(libri / "extracted", out, progress=False, splits="dev-clean")
    assert record["source_kind"] == "extracted" and list(record["splits"]) == ["dev-clean"]
    assert record["files"] in ({"hardlink": 34}, {"symlink": 34}, {"copy": 34})
    src = libri / "extracted" / "LibriSpeech" / "dev-clean" / "174" / "50561" / "174-50561-0000.flac"
    dst = out / "dev-clean" / "174" / "50561" / "174-50561-0000.flac"
    if record["files"] == {"hardlink": 34}:
        assert dst.stat().st_ino == src.stat().st_ino  # linked, not copied
    assert not (out / "train-clean-100").exists()
    # the LibriSpeech/ folder itself is a source too, and gives the same manifest
    again = prepare_speech(libri / "extracted" / "LibriSpeech", tmp_path / "dev2", progress=False, splits=["dev-clean"])
    assert again["splits"] == record["splits"]
    # a folder of tarballs gives the same split, and so does a single tarball
    assert (
        prepare_speech(libri / "tarballs", tmp_path / "dev4", progress=False, splits="dev-clean")["splits"]
        == (record["splits"])
    )
    single = prepare_speech(libri / "tarballs" / "dev-clean.tar.gz", tmp_path / "dev3", progress=False)
    assert single["splits"] == record["splits"] and single["source_kind"] == "tarballs"
    assert (out / "dev-clean.manifest.tsv").read_bytes() == (tmp_path / "dev2" / "dev-clean.manifest.tsv").read_bytes()


def _dev_source(libri: Path, root: Path) -> Path:
    """A writable copy of the tiny dev-clean split as LibriSpeech/dev-clean."""
    shutil.copytree(libri / "extracted" / "LibriSpeech" / "dev-clean", root / "LibriSpeech" / "dev-clean")
    return root / "LibriSpeech" / "dev-clean" / "84" / "121123"


def test_speech_bad_sources(libri: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    chapter = _dev_source(libri, tmp_path / "a")
    (chapter / "84-121123-0004.flac").unlink()  # a transcript line without its flac
    bad(lambda: prepare_speech(tmp_path / "a", out, progress=False), "84-121123.trans.txt", "84-121123-0004")
    assert_nothing_left(out)

    chapter = _dev_source(libri, tmp_path / "b")
    trans = chapter / "84-121123.trans.txt"
    trans.write_text("".join(line + "\n" for line in trans.read_text().splitlines() if "-0007 " not in line))
    bad(lambda: prepare_speech(tmp_path / "b", out, progress=False), str(chapter / "84-121123-0007.flac"))
    assert_nothing_left(out)

    _dev_source(libri, tmp_path / "c")
    (tmp_path / "c" / "LibriSpeech" / "test-clean").mkdir()  # an empty split
    bad(lambda: prepare_speech(tmp_path / "c", out, progress=False), "test-clean", "empty")
    assert_nothing_left(out)

    # the same faults inside a tarball are named as <tarball>:<member>
    (tmp_path / "d").mkdir()
    tarball = tmp_path / "d" / "dev-clean.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "b" / "LibriSpeech", arcname="LibriSpeech")
    member = f"{tarball}:LibriSpeech/dev-clean/84/121123/84-121123-0007.flac"
    bad(lambda: prepare_speech(tmp_path / "d", out, progress=False), member)
    assert_nothing_left(out)

    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "b" / "LibriSpeech" / "dev-clean", arcname="dev-clean")  # no LibriSpeech/ prefix
    bad(lambda: prepare_speech(tmp_path / "d", out, progress=False), str(tarball), "LibriSpeech/")
    assert_nothing_left(out)

    tarball.write_bytes(b"not gzip")
    bad(lambda: prepare_speech(tmp_path / "d", out, progress=False), str(tarball), "not a readable")
    assert_nothing_left(out)

    shutil.copytree(tmp_path / "a" / "LibriSpeech", tmp_path / "d" / "LibriSpeech")
    bad(lambda: prepare_speech(tmp_path / "d", out, progress=False), str(tmp_path / "d"), "both")
    bad(lambda: prepare_speech(tmp_path / "nowhere", out, progress=False), str(tmp_path / "nowhere"))
    bad(lambda: prepare_speech(libri / "tarballs", out, progress=False, vocab_size=3), "vocab_size")
    assert_nothing_left(out)


def test_speech_short_run_on_prepared_folder(speech_out: Path, tmp_path: Path) -> None:
    spec = resolve(
        get_task("speech"), "adascale", 2, 0, "tiny", data_root=speech_out, overrides={"T1": 6, "eval_every": 6}
    )
    summary = run_spec(spec, tmp_path, progress=False)
    assert summary["status"] == "completed" and summary["iterations"] >= 3
    assert np.isfinite(summary["train_loss"]) and 0 <= summary["val_metric"] <= 100


# ---------------------------------------------------------------- transformer


@pytest.fixture(scope="module")
def wmt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy corpus as raw text with WMT's names: train.*, newstest2013.* (valid), newstest2014.* (test)."""
    root = tmp_path_factory.mktemp("wmt_raw")
    write_raw(root, tiny_pairs(0))
    for split, name in (("valid", "newstest2013"), ("test", "newstest2014")):
        for lang in ("en", "de"):
            (root / f"{split}.{lang}").rename(root / f"{name}.{lang}")
    return root


@pytest.fixture(scope="module")
def wmt_out(wmt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wmt_prepared") / "out"
    prepare_text(wmt, out, vocab_size="64", hard_vocab_limit="false")  # as text, the way a command line gives them
    return out


def test_transformer_from_raw_text(wmt: Path, wmt_out: Path) -> None:
    record = json.loads((wmt_out / MARKER).read_text())
    assert record["task"] == "transformer" and record["source_kind"] == "raw" and record["joint"]
    assert {s: v["sentences"] for s, v in record["splits"].items()} == {"train": 1600, "valid": 100, "test": 100}
    assert record["splits"]["valid"]["source"] == ["newstest2013.en", "newstest2013.de"]
    assert record["splits"]["train"]["en_unk"] == 0 and record["vocab_size"]["en"] % 8 == 0
    names = {"dict.en.txt", "dict.de.txt", "spm.model", "spm.vocab", "valid.ref.de", "test.ref.de", MARKER}
    names |= {f"{s}.en-de.{lang}.{ext}" for s in ("train", "valid", "test") for lang in ("en", "de") for ext in EXTS}
    assert {p.name for p in wmt_out.iterdir()} == names
    assert (wmt_out / "dict.en.txt").read_bytes() == (wmt_out / "dict.de.txt").read_bytes()
    assert len((wmt_out / "dict.en.txt").read_text().splitlines()) + 4 == record["vocab_size"]["de"]
    train = MMapIndexedDataset(wmt_out / "train.en-de.de")
    assert len(train) == 1600 and train.code == 8 and all(train[i][-1] == 2 for i in range(0, 1600, 99))
    assert int(train.sizes.sum()) == record["splits"]["train"]["de_tokens"]
    assert (wmt_out / "test.ref.de").read_text() == (wmt / "newstest2014.de").read_text()
    stamp = (wmt_out / MARKER).stat().st_mtime_ns
    assert prepare_text(wmt, wmt_out, progress=False, **SPM) == record  # idempotent
    assert (wmt_out / MARKER).stat().st_mtime_ns == stamp


def test_transformer_prepared_reads_as_the_raw_layout(wmt: Path, wmt_out: Path, tmp_path: Path) -> None:
    """The binarized output and the task's raw layout (the same text + spm.model) give the same token ids,
    references and detokenisation, so BLEU is computed the same way on both."""
    raw = tmp_path / "raw"
    write_raw(raw, tiny_pairs(0))
    shutil.copy(wmt_out / "spm.model", raw)
    cfg = dict(Transformer.presets["tiny"]["data"])  # format fairseq, bpe subword_nmt: spm.model decides
    raw_cfg = {**cfg, "format": "raw", "spm_model": "spm.model"}
    vocab, raw_vocab = D.load_vocab(wmt_out, cfg), D.load_vocab(raw, raw_cfg)
    assert vocab.bpe == "sentencepiece" and vocab.joint
    assert vocab.src.symbols[: len(raw_vocab.src)] == raw_vocab.src.symbols  # the same ids, then padding
    assert set(vocab.src.symbols[len(raw_vocab.src) :]) <= {f"madeupword{i:04d}" for i in range(8)}
    for split in ("train", "valid"):
        a, b = D.load_split(wmt_out, cfg, split, vocab), D.load_split(raw, raw_cfg, split, raw_vocab)
        assert len(a) == len(b)
        assert all(np.array_equal(a.src[i], b.src[i]) and np.array_equal(a.tgt[i], b.tgt[i]) for i in range(len(a)))
    ev, raw_ev = D.make_eval_set(wmt_out, cfg, vocab, 1024), D.make_eval_set(raw, raw_cfg, raw_vocab, 1024)
    assert ev.refs == raw_ev.refs and list(ev.refs.values()) == (raw / "valid.de").read_text().splitlines()
    assert all(ev.detok(ev.data.tgt[i]) == ev.refs[i] for i in range(100))  # lossless on the toy text
    # a reference file that does not match the split is a one-line error naming it
    (tmp_path / "short").mkdir()
    for f in wmt_out.iterdir():
        os.link(f, tmp_path / "short" / f.name)
    (tmp_path / "short" / "valid.ref.de").unlink()
    (tmp_path / "short" / "valid.ref.de").write_text("only one line\n")
    bad(lambda: D.load_split(tmp_path / "short", cfg, "valid", vocab), "valid.ref.de", "1 lines", "100")


def test_transformer_fairseq_output_is_linked_through(wmt_out: Path, tmp_path: Path) -> None:
    src = tmp_path / "fairseq"
    write_binarized(src, tiny_pairs(0))
    record = prepare_text(src, tmp_path / "out", progress=False)
    assert record["source_kind"] == "fairseq" and record["joint"] and record["references"] == []
    assert record["segmentation"] == "as the preset's data.bpe says"
    assert record["splits"]["train"]["sentences"] == 1600 and sum(record["files"].values()) == 14
    if record["files"] == {"hardlink": 14}:
        assert (tmp_path / "out" / "train.en-de.en.bin").stat().st_ino == (src / "train.en-de.en.bin").stat().st_ino
    vocab = D.load_vocab(tmp_path / "out", Transformer.presets["tiny"]["data"])
    assert vocab.bpe == "subword_nmt"  # no spm.model: the preset's post-processing
    # a prepared folder is fairseq output too: its model and references come along
    again = prepare_text(wmt_out, tmp_path / "again", progress=False)
    assert again["segmentation"] == "sentencepiece (spm.model)"
    assert again["references"] == ["valid.ref.de", "test.ref.de"]
    assert (tmp_path / "again" / "spm.model").read_bytes() == (wmt_out / "spm.model").read_bytes()


def test_transformer_bad_sources(wmt: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    src = tmp_path / "raw"
    shutil.copytree(wmt, src)
    with open(src / "newstest2014.de", "a", encoding="utf-8") as f:
        f.write("ein Satz zu viel\n")
    bad(lambda: prepare_text(src, out, progress=False, **SPM), "newstest2014.en", "newstest2014.de", "100", "101")
    assert_nothing_left(out)
    (src / "newstest2014.de").unlink()
    bad(lambda: prepare_text(src, out, progress=False, **SPM), "newstest2014.de", "missing")
    assert_nothing_left(out)
    (src / "newstest2014.en").unlink()
    bad(lambda: prepare_text(src, out, progress=False, **SPM), "test.en", "newstest2014.en", "missing")
    shutil.copy(wmt / "newstest2014.en", src / "test.en")
    shutil.copy(wmt / "newstest2014.de", src / "test.de")
    shutil.copy(wmt / "newstest2013.en", src / "valid.en")
    bad(lambda: prepare_text(src, out, progress=False, **SPM), "valid", "newstest2013", "twice")
    (src / "newstest2013.en").unlink()
    (src / "newstest2013.de").rename(src / "valid.de")
    bad(lambda: prepare_text(src, out, progress=False, vocab_size=5000), "train.en", "sentencepiece", "vocab_size")
    assert_nothing_left(out)
    bad(lambda: prepare_text(src, out, progress=False, splits="x"), "splits")

    fs = tmp_path / "fairseq"
    write_binarized(fs, tiny_pairs(0))
    write_indexed(fs / "valid.en-de.de", [[5, 2]] * 99)  # one sentence short of valid.en-de.en
    bad(lambda: prepare_text(fs, out, progress=False), "valid.en-de.en.bin", "valid.en-de.de.bin", "100", "99")
    assert_nothing_left(out)
    write_indexed(fs / "valid.en-de.de", [[5, 2]] * 99 + [[60000, 2]])
    bad(lambda: prepare_text(fs, out, progress=False), "valid.en-de.de.bin", "60000", "dict.de.txt")
    assert_nothing_left(out)
    write_binarized(fs, tiny_pairs(0))
    (fs / "test.en-de.en.idx").unlink()
    bad(lambda: prepare_text(fs, out, progress=False), "test.en-de.en.idx", "missing")
    assert_nothing_left(out)


def test_transformer_short_run_on_prepared_folder(wmt_out: Path, tmp_path: Path) -> None:
    task = get_task("transformer")
    spec = resolve(task, "adascale", 2, 0, "tiny", data_root=wmt_out, overrides={"T1": 6, "eval_every": 6})
    summary = run_spec(spec, tmp_path, progress=False)
    assert summary["status"] == "completed" and summary["iterations"] >= 3
    evals = [r for r in read_jsonl(run_dir_of(tmp_path, spec) / METRICS) if r.get("eval")]
    assert np.isfinite(summary["train_loss"]) and summary["metric"] == "bleu" and evals
    assert summary["val_metric"] == evals[-1]["bleu"] and 0 <= summary["val_metric"] <= 100  # the last BLEU

"""`adascale-bench prepare speech`: LibriSpeech as openslr distributes it -> the folder the task reads.

Source, one of:

* a folder of the openslr tarballs, `*.tar.gz` (train-clean-100.tar.gz, dev-clean.tar.gz, ...), each
  holding `LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac` and
  `<speaker>-<chapter>.trans.txt` (a single tarball may also be given as the source);
* their extraction: a folder holding `LibriSpeech/<split>/...`, or that `LibriSpeech/` folder itself
  (every non-hidden sub-folder is a split).

A folder holding both tarballs and a `LibriSpeech/` folder is refused as ambiguous (pass one of them).
Tar members are extracted with tarfile's "data" filter; extracted files are hard-linked
(`preparing.link_or_copy`), not copied. Only the flac and transcript files are taken: the tarballs'
README/SPEAKERS/CHAPTERS text files are not read by the task.

Output (`out`):

    <out>/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
    <out>/<split>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt
    <out>/<split>.manifest.tsv      one row per utterance: uid, path, num_samples, sample_rate, text
                                    (format: tasks/speech/data.py; read_split uses it when present)
    <out>/PREPARED.json             written last (tasks/preparing.py)

Verified before anything is kept: every transcript line has its flac, every flac has a transcript line,
no split is empty, every flac decodes whole as a run reads it (`decoded`: soundfile, every frame its header
claims) and all share one sample rate. A bad source is a
one-line UserError naming the file (for a tarball, `<tarball>:<member>`), and nothing is left at `out`.

Options: `splits` (a list, or a comma-separated string, of split names to take; default every split found).
"""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import soundfile as sf

from bench.core import safefs
from bench.core.errors import UserError
from tasks import preparing
from tasks.preparing import (
    children,
    confining,
    exists,
    finish,
    folder_bytes,
    human_bytes,
    link_or_copy,
    prepared,
    safe_id,
    staged,
)
from tasks.preparing import progress as bar

from . import data

TASK = "speech"
EXPECTED = (
    "a folder of LibriSpeech *.tar.gz (LibriSpeech/<split>/<speaker>/<chapter>/...) or their extracted "
    "LibriSpeech/ folder"
)
_TRANS = re.compile(r"(\d+)-(\d+)\.trans\.txt")
_KEEP = (".flac", ".trans.txt")
LIBRISPEECH = (*data.TRAIN_960, "dev-clean", "dev-other", "test-clean", "test-other")


@confining
def prepare(source: Path, out: Path, *, progress: bool = True, **options: Any) -> dict[str, Any]:
    """Prepare LibriSpeech from `source` into `out` (see the module docstring); returns the PREPARED.json
    record: per-split utterances, speakers, chapters, hours and bytes, and the totals."""
    source, out = Path(source), Path(out)
    wanted = _splits_option(options.pop("splits", None))
    if options:
        raise UserError(f"prepare speech: unknown option(s) {', '.join(sorted(options))}; expected splits")
    done = prepared(out, TASK)
    if done is not None:
        return done
    tarballs, split_dirs = _find_source(source, wanted)
    show: Callable[..., Iterable[Any]] = bar if progress else (lambda items, *a, **k: items)
    with staged(out, TASK, source) as stage:
        origin: dict[str, str] = {}  # stage-relative path -> the source file it came from, for messages
        labels: dict[str, str] = {}  # split -> where it came from
        counts: dict[str, int] = {}
        for tarball in tarballs:
            named = tarball.name.removesuffix(".tar.gz")
            if wanted is not None and named in LIBRISPEECH and named not in wanted:
                continue  # openslr names each tarball after its split: no need to read it through
            for split in _extract(tarball, stage, origin, wanted, show, counts):
                labels.setdefault(split, str(tarball))
        for split, folder in split_dirs.items():
            labels[split] = str(folder)
            for path in show(_source_files(folder), f"link {split}"):
                if path.name.endswith(_KEEP):
                    rel = path.relative_to(folder.parent).as_posix()
                    origin[rel] = str(path)
                    how = link_or_copy(path, stage / rel)
                    counts[how] = counts.get(how, 0) + 1
        missing = [s for s in wanted or () if s not in labels]
        if missing:
            raise UserError(f"{source}: split {missing[0]} not found (splits option); expected {EXPECTED}")
        splits: dict[str, dict[str, Any]] = {}
        rate: tuple[int, str] | None = None  # the corpus's sample rate and the file it was first seen in
        for split in sorted(labels):
            utts, rate = _index_split(stage, split, labels[split], origin, rate, show)
            data.write_manifest(stage / data.MANIFEST.format(split=split), stage, utts, rate[0])
            if data.read_split(stage, split, rate[0]) != utts:
                raise RuntimeError(f"{split}: the manifest does not read back as written")  # a bug, not the source
            splits[split] = _split_summary(utts, rate[0])
        assert rate is not None
        total = folder_bytes(stage)
        summary = {
            "source_kind": "tarballs" if tarballs else "extracted",
            "splits": splits,
            "sample_rate": rate[0],
            "utterances": sum(s["utterances"] for s in splits.values()),
            "hours": round(sum(s["hours"] for s in splits.values()), 4),
            "bytes": total,
            "size": human_bytes(total),
            "files": counts,
            "manifest": data.MANIFEST,
        }
        finish(stage, TASK, source, summary)
    return prepared(out) or summary


def _source_files(folder: Path) -> list[Path]:
    """The files <speaker>/<chapter>/* of an extracted split folder (as glob("*/*/*") lists them), reached
    without a link: a linked speaker or chapter folder, or a linked file, is refused (tasks.preparing)."""
    visible = lambda name, kind: not name.startswith(".")  # noqa: E731
    return [
        path
        for speaker, kind in children(folder, visible)
        if kind == "dir"
        for chapter, kind2 in children(speaker, visible)
        if kind2 == "dir"
        for path, kind3 in children(chapter, visible)
        if kind3 == "file"
    ]


def _splits_option(value: Any) -> list[str] | None:
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise UserError(f"prepare speech: splits={value!r}; expected LibriSpeech split names, e.g. dev-clean")
    return [s for n in names for s in data.split_names(n)]


def _find_source(source: Path, wanted: list[str] | None) -> tuple[list[Path], dict[str, Path]]:
    """(tarballs, {split: extracted split folder}): exactly one of them is non-empty."""
    if source.is_file() and source.name.endswith(".tar.gz"):
        return [source], {}
    if not source.is_dir():
        raise UserError(f"{source}: source not found; expected {EXPECTED}")
    tarballs = [p for p, _ in children(source, lambda name, kind: kind == "file" and name.endswith(".tar.gz"))]
    if tarballs and exists(source / "LibriSpeech"):
        raise UserError(
            f"{source}: holds both *.tar.gz and an extracted LibriSpeech/ folder; pass one of them as the source"
        )
    if tarballs:
        return tarballs, {}
    root = source / "LibriSpeech" if exists(source / "LibriSpeech") else source
    dirs = {d.name: d for d, _ in children(root, lambda name, kind: kind == "dir" and not name.startswith("."))}
    if wanted is not None:
        dirs = {name: d for name, d in dirs.items() if name in wanted}
    if not dirs:
        raise UserError(f"{source}: no *.tar.gz and no split folders; expected {EXPECTED}")
    return [], dirs


def _extract(
    tarball: Path,
    stage: Path,
    origin: dict[str, str],
    wanted: list[str] | None,
    show: Callable[..., Iterable[Any]],
    counts: dict[str, int],
) -> list[str]:
    """Extract the flac and transcript members of one tarball into `stage`, without their LibriSpeech/ prefix
    (a member already there at its full size, from an interrupted run, is kept). Returns the splits it
    extracted (those in `wanted`, when given)."""
    splits: list[str] = []
    usable = False
    try:
        job = preparing.Extraction(tarball)
        with safefs.open_file(tarball) as f, tarfile.open(fileobj=f, mode="r:gz") as tar:
            for member in show(tar, f"extract {tarball.name}"):
                parts = PurePosixPath(member.name).parts
                if not parts or parts[0] != "LibriSpeech":
                    raise UserError(
                        f"{tarball}: member {member.name!r} is not under LibriSpeech/; expected an openslr "
                        "LibriSpeech tarball"
                    )
                rel = parts[1:]
                if len(rel) != 4 or not member.isfile() or not rel[3].endswith(_KEEP):
                    continue  # folders and the corpus's README/SPEAKERS/... files
                for part in rel:
                    safe_id(part, f"{tarball}:{member.name}", "path part")  # the member's place under --out
                usable = True
                if wanted is not None and rel[0] not in wanted:
                    continue
                key = "/".join(rel)
                origin[key] = f"{tarball}:{member.name}"
                if rel[0] not in splits:
                    splits.append(rel[0])
                dst = stage / key
                if dst.is_file() and dst.stat().st_size == member.size:
                    counts["exists"] = counts.get("exists", 0) + 1
                    continue
                preparing.extract_member(tar, member, stage, key, job)
                counts["extracted"] = counts.get("extracted", 0) + 1
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise UserError(f"{tarball}: not a readable LibriSpeech .tar.gz ({e})") from None
    if not usable:
        raise UserError(
            f"{tarball}: holds no LibriSpeech/<split>/<speaker>/<chapter>/*.flac or *.trans.txt; expected {EXPECTED}"
        )
    return splits


def _index_split(
    stage: Path,
    split: str,
    label: str,
    origin: dict[str, str],
    rate: tuple[int, str] | None,
    show: Callable[..., Iterable[Any]],
) -> tuple[list[data.Utterance], tuple[int, str]]:
    """A split's utterances in read_split's order, with every flac header read and every file checked."""

    def name(path: Path) -> str:
        return origin.get(path.relative_to(stage).as_posix(), str(path))

    folder = stage / split
    transcripts = sorted(folder.glob("*/*/*.trans.txt")) if folder.is_dir() else []
    if not transcripts:
        raise UserError(f"{label}: split {split} is empty; expected <speaker>/<chapter>/<speaker>-<chapter>.trans.txt")
    flacs = set(folder.glob("*/*/*.flac"))
    pending: list[tuple[str, Path, str]] = []
    for trans in transcripts:
        m = _TRANS.fullmatch(trans.name)
        if not m or (m[1], m[2]) != (trans.parent.parent.name, trans.parent.name):
            raise UserError(f"{name(trans)}: expected <speaker>/<chapter>/<speaker>-<chapter>.trans.txt")
        for uid, text in data.parse_transcripts(trans, name(trans)):
            path = trans.parent / f"{uid}.flac"
            if path not in flacs:
                raise UserError(f"{name(trans)}: line {uid} has no audio {uid}.flac beside it")
            flacs.discard(path)
            pending.append((uid, path, text))
    if flacs:
        orphan = min(flacs)
        raise UserError(f"{name(orphan)}: no transcript line for this utterance in any {split} *.trans.txt")
    utts = []
    for uid, path, text in show(pending, f"decode {split} audio"):
        info = decoded(path, name(path))
        if rate is None:
            rate = (int(info.samplerate), name(path))
        elif info.samplerate != rate[0]:
            raise UserError(f"{name(path)}: sample rate {info.samplerate} Hz, but {rate[1]} has {rate[0]} Hz")
        utts.append(data.Utterance(uid, path, text, int(info.frames)))
    assert rate is not None
    return utts, rate


def decoded(path: Path, shown: str) -> Any:
    """`path`'s header (soundfile's info), once every frame it claims has been decoded by the reader a run
    uses (`tasks.speech.data.load_audio`: soundfile), block by block: a FLAC cut after its header ("flac
    decoder lost sync" mid-run) or one holding fewer frames than it claims is one line here."""
    try:
        with sf.SoundFile(str(path)) as f:
            info, frames = sf.info(str(path)), 0
            for block in f.blocks(blocksize=1 << 16, dtype="float32", always_2d=True):
                frames += len(block)
    except (RuntimeError, sf.LibsndfileError) as e:
        raise UserError(f"{shown}: not readable audio ({' '.join(str(e).split())})") from None
    if frames != info.frames:
        raise UserError(f"{shown}: its header claims {info.frames} frames, {frames} decode; damaged audio")
    return info


def _split_summary(utts: list[data.Utterance], rate: int) -> dict[str, Any]:
    return {
        "utterances": len(utts),
        "speakers": len({u.uid.split("-")[0] for u in utts}),
        "chapters": len({u.uid.rsplit("-", 1)[0] for u in utts}),
        "hours": round(sum(u.num_samples for u in utts) / rate / 3600, 4),
        "bytes": sum(Path(u.path).stat().st_size for u in utts),
    }

"""`adascale-bench prepare transformer`: WMT14 En-De parallel text -> fairseq's binarized mmap format.

Source (a folder), one of:

* raw parallel text, UTF-8, one sentence a line, line i of one side translating line i of the other
  (shown for the default languages src=en, tgt=de; all three splits are required):

      train   train.en / train.de
      valid   valid.en / valid.de   or  newstest2013.en / newstest2013.de
      test    test.en / test.de     or  newstest2014.en / newstest2014.de

  A split found under both of its names is refused as ambiguous.
* `fairseq-preprocess --dataset-impl mmap` output: dict.en.txt, dict.de.txt and
  {train,valid,test}.en-de.{en,de}.{bin,idx} (chosen when dict.en.txt is there). Verified (dictionaries
  parse, every index opens, both sides have as many sentences, every token id is in its dictionary) and
  hard-linked through, with spm.model / spm.vocab / {valid,test}.ref.de when the folder has them.

Raw text is turned into what the task reads: the pairs are checked to line up; ONE joint sentencepiece
model is trained on both sides of train; every split is encoded with it; one joint fairseq dictionary
(the model's pieces in the model's order, less its control and <unk> pieces, exactly as the task's raw
layout maps them, with their train counts, then `madeupwordNNNN` up to a multiple of 8 as
fairseq-preprocess pads) is written as both dict.en.txt and dict.de.txt, and the token ids (ending in
</s>) as {split}.en-de.{en,de}.bin/.idx with the suite's writer, so runs memory-map tokens.

Output:

    dict.en.txt, dict.de.txt           the joint dictionary (byte-identical: one shared embedding)
    {split}.en-de.{en,de}.bin / .idx   for split in train, valid, test
    spm.model, spm.vocab               the sentencepiece model; its presence makes the task join pieces
                                       with sentencepiece's rule (data.load_vocab)
    valid.ref.de, test.ref.de          the detokenised target text (the source's lines, stripped): the
                                       task's BLEU references (data.load_split)
    PREPARED.json

Options: vocab_size (32000), src ("en"), tgt ("de"), model_type ("unigram"), character_coverage (1.0),
input_sentence_size (10_000_000 sentences sampled for training the model; 0 = all), hard_vocab_limit
(True), threads (the CPU count).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.core import safefs
from bench.core.errors import UserError
from tasks.preparing import (
    confining,
    exists,
    finish,
    folder_bytes,
    human_bytes,
    link_or_copy,
    prepared,
    regular,
    safe_id,
    staged,
)
from tasks.preparing import progress as bar

from . import data as D
from .dictionary import MAX_BYTES as DICT_BYTES
from .dictionary import Dictionary
from .indexed import MMapIndexedDataset, best_fitting_int_dtype, write_indexed

TASK = "transformer"
SPLITS = {"train": ("train",), "valid": ("valid", "newstest2013"), "test": ("test", "newstest2014")}
MAX_DICT = DICT_BYTES  # a fairseq dictionary: a few MB
EXPECTED = (
    "raw text train.{s}/train.{t}, valid.{s}/valid.{t} (or newstest2013.*), test.{s}/test.{t} (or newstest2014.*), "
    "or fairseq-preprocess output (dict.{s}.txt, dict.{t}.txt, {{split}}.{s}-{t}.{{lang}}.bin/.idx)"
)
OPTIONS = {
    "vocab_size": 32000,
    "src": "en",
    "tgt": "de",
    "model_type": "unigram",
    "character_coverage": 1.0,
    "input_sentence_size": 10_000_000,
    "hard_vocab_limit": True,
    "threads": os.cpu_count() or 1,
}
CHUNK = 50_000  # sentences encoded at a time


_MODEL_TYPES = ("unigram", "bpe", "char", "word")  # sentencepiece's


def _checked(opts: dict[str, Any]) -> dict[str, Any]:
    """The options with their types checked and read from text where a command line gives text ("64",
    "false"): one-line errors, not a traceback from int("abc"). src and tgt name files under --out, so
    they must be plain names."""
    out = dict(opts)

    def bad(key: str, want: str) -> UserError:
        return UserError(f"prepare transformer: {key}={opts[key]!r} is not {want}")

    for key in ("vocab_size", "input_sentence_size", "threads"):
        value = out[key]
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < (key == "vocab_size" or key == "threads"):
            raise bad(key, "a non-negative integer" if key == "input_sentence_size" else "a positive integer")
        out[key] = value
    try:
        cov = out["character_coverage"]
        out["character_coverage"] = float(cov) if not isinstance(cov, bool) else math.nan
    except (TypeError, ValueError):
        out["character_coverage"] = math.nan
    if not 0 < out["character_coverage"] <= 1:
        raise bad("character_coverage", "a number in (0, 1]")
    flag = out["hard_vocab_limit"]
    flag = {"true": True, "false": False}.get(flag.strip().lower(), flag) if isinstance(flag, str) else flag
    if not isinstance(flag, bool):
        raise bad("hard_vocab_limit", "true or false")
    out["hard_vocab_limit"] = flag
    if out["model_type"] not in _MODEL_TYPES:
        raise bad("model_type", f"one of {', '.join(_MODEL_TYPES)}")
    for key in ("src", "tgt"):
        safe_id(out[key], "prepare transformer", f"language {key}")
    return out


@confining
def prepare(source: Path, out: Path, *, progress: bool = True, **options: Any) -> dict[str, Any]:
    """Prepare WMT14 En-De from `source` into `out` (see the module docstring); returns the PREPARED.json
    record: vocabulary size and, per split, sentences, tokens per side and <unk> count."""
    source, out = Path(source), Path(out)
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise UserError(f"prepare transformer: unknown option(s) {', '.join(unknown)}; expected {', '.join(OPTIONS)}")
    opts = _checked({**OPTIONS, **options})
    done = prepared(out, TASK)
    if done is not None:
        return done
    src, tgt = str(opts["src"]), str(opts["tgt"])
    expected = EXPECTED.format(s=src, t=tgt)
    if not safefs.is_dir(source):
        raise UserError(f"{source}: source folder not found; expected {expected}")
    show: Callable[..., Iterable[Any]] = bar if progress else (lambda items, *a, **k: items)
    fairseq = exists(source / f"dict.{src}.txt")
    files = {} if fairseq else _raw_files(source, src, tgt, expected)
    with staged(out, TASK, source) as stage:
        if fairseq:
            summary = _link_fairseq(source, stage, src, tgt)
        else:
            summary = _from_raw(files, stage, src, tgt, opts, show)
        summary["bytes"] = folder_bytes(stage)
        summary["size"] = human_bytes(summary["bytes"])
        finish(stage, TASK, source, summary)
    return prepared(out) or summary


# ---------------------------------------------------------------- raw text


def _raw_files(source: Path, src: str, tgt: str, expected: str) -> dict[str, tuple[Path, Path, int]]:
    """{split: (source file, target file, lines)} with the pairs checked to line up."""
    files = {}
    for split, names in SPLITS.items():
        found = [n for n in names if exists(source / f"{n}.{src}") or exists(source / f"{n}.{tgt}")]
        if len(found) > 1:
            raise UserError(
                f"{source}: {split} given twice, as {found[0]}.* and {found[1]}.*; keep one of them ({expected})"
            )
        stem = found[0] if found else names[0]
        pair = (source / f"{stem}.{src}", source / f"{stem}.{tgt}")
        for path in pair:
            if not exists(path):
                other = " or ".join(f"{n}.{path.suffix[1:]}" for n in names)
                raise UserError(f"{path}: missing {split} file ({other}); expected {expected}")
        counts = [_count_lines(p) for p in pair]
        if counts[0] != counts[1]:
            raise UserError(
                f"{pair[0]} has {counts[0]} lines but {pair[1]} has {counts[1]}; expected one sentence pair a line"
            )
        if counts[0] == 0:
            raise UserError(f"{pair[0]} and {pair[1]} are empty; expected one sentence pair a line")
        files[split] = (pair[0], pair[1], counts[0])
    return files


def _count_lines(path: Path) -> int:
    """The lines the task's text reader sees; one past safefs.MAX_LINE is refused (every later read of the
    file, by _lines, comes after this one)."""
    try:
        return sum(1 for _ in safefs.lines(regular(path)))
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _lines(path: Path) -> Iterator[str]:
    for line in safefs.lines(regular(path)):  # no link below --source is read, no line read whole
        yield line.strip()


def _train_spm(files: dict[str, tuple[Path, Path, int]], stage: Path, opts: dict[str, Any], show: Any) -> Path:
    """Train the joint model on both sides of train into stage/spm.model (kept from an interrupted run)."""
    import sentencepiece as spm

    model = stage / "spm.model"
    if model.is_file():
        return model
    train_src, train_tgt, n = files["train"]

    def sentences() -> Iterator[str]:
        yield from show(_lines(train_src), "spm read train (src)", total=n, unit="line")
        yield from show(_lines(train_tgt), "spm read train (tgt)", total=n, unit="line")

    spm.set_random_generator_seed(0)
    tmp = stage / ".spm.tmp"
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences(),
            model_prefix=str(tmp),
            vocab_size=int(opts["vocab_size"]),
            model_type=str(opts["model_type"]),
            character_coverage=float(opts["character_coverage"]),
            input_sentence_size=int(opts["input_sentence_size"]),
            shuffle_input_sentence=True,
            hard_vocab_limit=_flag(opts["hard_vocab_limit"], "hard_vocab_limit"),
            num_threads=int(opts["threads"]),
            minloglevel=1 if show is bar else 2,
        )
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise UserError(
            f"{train_src} + {train_tgt}: sentencepiece training failed ({reason}); "
            "try a smaller vocab_size or hard_vocab_limit=False"
        ) from None
    os.replace(f"{tmp}.vocab", stage / "spm.vocab")
    os.replace(f"{tmp}.model", model)
    return model


def _flag(value: Any, name: str) -> bool:
    """A boolean option, also from the command line's text ("false", "0", "no")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UserError(f"prepare transformer: {name}={value!r}; expected true or false")


def _from_raw(
    files: dict[str, tuple[Path, Path, int]], stage: Path, src: str, tgt: str, opts: dict[str, Any], show: Any
) -> dict[str, Any]:
    import sentencepiece as spm

    model = _train_spm(files, stage, opts, show)
    sp = spm.SentencePieceProcessor(model_file=str(model))
    # the task's raw-layout mapping (data.load_vocab): every piece but the control ones and <unk>, in order
    kept = [i for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    pieces = Dictionary.from_symbols([sp.id_to_piece(i) for i in kept])
    remap = np.full(sp.get_piece_size(), pieces.unk_index, dtype=np.int64)
    for i in kept:
        remap[i] = pieces.index(sp.id_to_piece(i))
    dtype = best_fitting_int_dtype(_padded(len(pieces)))
    counts = np.zeros(len(pieces), dtype=np.int64)
    splits: dict[str, Any] = {}
    for split, (src_file, tgt_file, n) in files.items():
        info: dict[str, Any] = {"sentences": n, "source": [src_file.name, tgt_file.name]}
        for lang, path in ((src, src_file), (tgt, tgt_file)):
            stats = {"tokens": 0, "unk": 0}
            lines = show(_lines(path), f"encode {path.name}", total=n, unit="line")
            seqs = _encoded(sp, remap, lines, int(opts["threads"]), pieces, stats, counts if split == "train" else None)
            write_indexed(stage / f"{split}.{src}-{tgt}.{lang}", seqs, dtype)
            info[f"{lang}_tokens"], info[f"{lang}_unk"] = stats["tokens"], stats["unk"]
        if split != "train":
            refs = stage / D.REFS.format(split=split, lang=tgt)
            safefs.write_text(refs, "".join(line + "\n" for line in _lines(tgt_file)))
        splits[split] = info
    joint = Dictionary()
    for sym, c in zip(pieces.symbols[pieces.nspecial :], counts[pieces.nspecial :].tolist(), strict=True):
        joint.add_symbol(sym, n=c)
    i = 0
    while len(joint) % 8:
        joint.add_symbol(f"madeupword{i:04d}", n=0)
        i += 1
    for lang in (src, tgt):
        joint.save(stage / f"dict.{lang}.txt")
    _verify(stage, src, tgt, {s: f[2] for s, f in files.items()})
    return {
        "source_kind": "raw",
        "segmentation": "sentencepiece",
        "spm_vocab_size": sp.get_piece_size(),
        "vocab_size": {src: len(joint), tgt: len(joint)},
        "joint": True,
        "splits": splits,
        "references": [D.REFS.format(split=s, lang=tgt) for s in files if s != "train"],
    }


def _padded(n: int) -> int:
    return n + (-n) % 8


def _encoded(
    sp: Any,
    remap: np.ndarray,
    lines: Iterable[str],
    threads: int,
    d: Dictionary,
    stats: dict[str, int],
    counts: np.ndarray | None,
) -> Iterator[list[int]]:
    """Dictionary ids of each line's pieces, ending in </s>, encoded CHUNK lines at a time; `stats` gets the
    token (with </s>) and <unk> totals and `counts`, when given, each symbol's count."""
    chunk: list[str] = []
    for line in _with_end(lines):
        if line is not None:
            chunk.append(line)
        if chunk and (line is None or len(chunk) == CHUNK):
            ids = [remap[np.asarray(x, dtype=np.int64)] for x in sp.encode(chunk, out_type=int, num_threads=threads)]
            flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
            stats["tokens"] += int(flat.size) + len(ids)  # with each sentence's </s>, as the .bin holds
            stats["unk"] += int(np.count_nonzero(flat == d.unk_index))
            if counts is not None:
                counts += np.bincount(flat, minlength=len(counts))[: len(counts)]
            for x in ids:
                yield [*x.tolist(), d.eos_index]
            chunk = []


def _with_end(items: Iterable[str]) -> Iterator[str | None]:
    yield from items
    yield None


# ---------------------------------------------------------------- fairseq-preprocess output


def _link_fairseq(source: Path, stage: Path, src: str, tgt: str) -> dict[str, Any]:
    """Check fairseq-preprocess output, then hard-link it (and any spm model / references) into `stage`."""
    dicts = {lang: Dictionary.load(regular(source / f"dict.{lang}.txt")) for lang in (src, tgt)}
    splits: dict[str, Any] = {}
    names = [f"dict.{src}.txt", f"dict.{tgt}.txt"]
    for split in SPLITS:
        sets = {}
        for lang in (src, tgt):
            prefix = source / f"{split}.{src}-{tgt}.{lang}"
            for ext in (".idx", ".bin"):
                if not exists(Path(f"{prefix}{ext}")):
                    raise UserError(f"{prefix}{ext}: missing {split} file; expected {EXPECTED.format(s=src, t=tgt)}")
                regular(Path(f"{prefix}{ext}"))  # read by path below: a link is refused first
            sets[lang] = MMapIndexedDataset(prefix)  # its index checked against the .bin (check_index)
            sets[lang].check_ids(len(dicts[lang]), f"dict.{lang}.txt")
            names += [f"{split}.{src}-{tgt}.{lang}.idx", f"{split}.{src}-{tgt}.{lang}.bin"]
        a, b = sets[src], sets[tgt]
        if len(a) != len(b):
            raise UserError(f"{a.prefix}.bin has {len(a)} sentences but {b.prefix}.bin has {len(b)}; expected pairs")
        splits[split] = {
            "sentences": len(a),
            f"{src}_tokens": int(a.sizes.sum()),
            f"{tgt}_tokens": int(b.sizes.sum()),
        }
    extras = ["spm.model", "spm.vocab", *(D.REFS.format(split=s, lang=tgt) for s in SPLITS)]
    names += [n for n in extras if exists(source / n)]
    how: dict[str, int] = {}
    for name in names:
        kind = link_or_copy(source / name, stage / name)
        how[kind] = how.get(kind, 0) + 1
    _verify(stage, src, tgt, {s: v["sentences"] for s, v in splits.items()})
    spm_model = (stage / "spm.model").is_file()
    return {
        "source_kind": "fairseq",
        "segmentation": "sentencepiece (spm.model)" if spm_model else "as the preset's data.bpe says",
        "vocab_size": {src: len(dicts[src]), tgt: len(dicts[tgt])},
        "joint": safefs.read_bytes(source / f"dict.{src}.txt", MAX_DICT)
        == safefs.read_bytes(source / f"dict.{tgt}.txt", MAX_DICT),
        "splits": splits,
        "references": [n for n in extras[2:] if (stage / n).is_file()],
        "files": how,
    }


def _verify(stage: Path, src: str, tgt: str, sentences: dict[str, int]) -> None:
    """Read the prepared folder back with the task's own loader (a mismatch is a bug here, not the source's)."""
    cfg = {"format": "fairseq", "src": src, "tgt": tgt, "train_split": "train", "eval_split": "test"}
    vocab = D.load_vocab(stage, cfg)
    for split, n in sentences.items():
        got = len(D.load_split(stage, cfg, split, vocab))
        if got != n:
            raise RuntimeError(f"{stage}: {split} reads back {got} sentences, {n} written")

"""Parallel corpora on disk -> length-bucketed max-tokens batches.

Two layouts under the data root (split and language names come from the preset's `data`):

* fairseq (default): what `fairseq-preprocess --dataset-impl mmap` writes:
  `dict.{src}.txt`, `dict.{tgt}.txt` and `{split}.{src}-{tgt}.{lang}.bin/.idx` for lang in (src, tgt).
  The dictionaries are joint (one shared embedding matrix) when the two files are byte-identical, as
  `--joined-dictionary` makes them. Two optional files, which `adascale-bench prepare transformer`
  writes: `spm.model` (`data["spm_model"]`), meaning the tokens are sentencepiece pieces, so they are
  joined with sentencepiece's rule (post_process "sentencepiece") whatever `data["bpe"]` says; and
  `{split}.ref.{tgt}`, the split's detokenised target text (one sentence a line), used as the BLEU
  references instead of the references rebuilt from token ids (which sentencepiece's normalisation and
  <unk> would alter).
* raw (`data["format"] == "raw"`): untokenised `{split}.{src}` / `{split}.{tgt}` text, one sentence a line,
  and a sentencepiece model `data["spm_model"]` that encodes both sides (so the vocabulary is joint). Pieces
  are mapped into a fairseq-style Dictionary, as fairseq's own sentencepiece recipe does.

Batching follows fairseq: order by source length then target length (random tie-break from the run seed),
then pack greedily so that max(len) * n_sentences <= max_tokens, where len = max(src, tgt) tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.core import safefs
from bench.core.errors import UserError

from .dictionary import Dictionary
from .indexed import MMapIndexedDataset

FAIRSEQ_LAYOUT = "fairseq-preprocess output: dict.{src}.txt, dict.{tgt}.txt, {split}.{src}-{tgt}.{lang}.bin/.idx"
RAW_LAYOUT = "raw text {split}.{src} / {split}.{tgt} (one sentence a line) and a sentencepiece model"
REFS = "{split}.ref.{lang}"  # detokenised references beside fairseq-format data (optional)


@dataclass
class Vocab:
    src: Dictionary
    tgt: Dictionary
    joint: bool
    bpe: str | None  # how to undo the subword segmentation (fairseq's post_process symbol)
    spm: Any = None  # sentencepiece processor in the raw layout


@dataclass
class ParallelData:
    """Token arrays (ending in </s>) of one split, with their lengths and, for raw text, the references."""

    src: Sequence[np.ndarray]
    tgt: Sequence[np.ndarray]
    src_sizes: np.ndarray
    tgt_sizes: np.ndarray
    raw_refs: list[str] | None = None

    def __len__(self) -> int:
        return len(self.src_sizes)


def _fmt(data_cfg: dict[str, Any]) -> str:
    fmt = data_cfg.get("format", "fairseq")
    if fmt not in ("fairseq", "raw"):
        raise UserError(f"data.format {fmt!r}; expected 'fairseq' or 'raw'")
    return fmt


def required_files(root: Path, data_cfg: dict[str, Any]) -> list[Path]:
    """Every file a run reads (training and evaluation splits)."""
    root = Path(root)
    src, tgt = data_cfg["src"], data_cfg["tgt"]
    splits = dict.fromkeys([data_cfg["train_split"], data_cfg["eval_split"]])
    if _fmt(data_cfg) == "raw":
        files = [root / data_cfg.get("spm_model", "spm.model")]
        for split in splits:
            files += [root / f"{split}.{src}", root / f"{split}.{tgt}"]
        return files
    files = [root / f"dict.{src}.txt", root / f"dict.{tgt}.txt"]
    for split in splits:
        for lang in (src, tgt):
            files += [root / f"{split}.{src}-{tgt}.{lang}.idx", root / f"{split}.{src}-{tgt}.{lang}.bin"]
    return files


def check_layout(root: Path, data_cfg: dict[str, Any]) -> None:
    """UserError naming the first missing file and the layout expected."""
    layout = RAW_LAYOUT if _fmt(data_cfg) == "raw" else FAIRSEQ_LAYOUT
    if not Path(root).is_dir():
        raise UserError(f"data root {root} does not exist; expected {layout}")
    for path in required_files(root, data_cfg):
        if not path.is_file():
            raise UserError(f"missing {path}; expected {layout}")


def load_vocab(root: Path, data_cfg: dict[str, Any]) -> Vocab:
    root = Path(root)
    if _fmt(data_cfg) == "raw":
        import sentencepiece as spm

        model = root / data_cfg.get("spm_model", "spm.model")
        if not model.is_file():
            raise UserError(f"missing {model}; expected {RAW_LAYOUT}")
        sp = spm.SentencePieceProcessor(model_file=str(model))
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
        d = Dictionary.from_symbols(pieces)
        return Vocab(d, d, True, "sentencepiece", sp)
    src_file, tgt_file = root / f"dict.{data_cfg['src']}.txt", root / f"dict.{data_cfg['tgt']}.txt"
    src, tgt = Dictionary.load(src_file), Dictionary.load(tgt_file)
    joint = src_file.read_bytes() == tgt_file.read_bytes()
    bpe = data_cfg.get("bpe", "subword_nmt")
    if (root / data_cfg.get("spm_model", "spm.model")).is_file():
        bpe = "sentencepiece"  # the pieces of that model (prepare writes it beside the binarized data)
    return Vocab(src, tgt if not joint else src, joint, bpe)


def read_lines(path: Path) -> list[str]:
    """A text file's lines, stripped, split as fairseq reads text (iterating the file)."""
    with open(path, encoding="utf-8") as f:  # a prepared folder's may be link_or_copy's link: followed
        return [line.strip() for line in safefs.bounded_lines(f, path)]


def load_split(root: Path, data_cfg: dict[str, Any], split: str, vocab: Vocab) -> ParallelData:
    root = Path(root)
    src, tgt = data_cfg["src"], data_cfg["tgt"]
    if _fmt(data_cfg) == "raw":
        sides, lines = [], []
        for lang, d in ((src, vocab.src), (tgt, vocab.tgt)):
            path = root / f"{split}.{lang}"
            if not path.is_file():
                raise UserError(f"missing {path}; expected {RAW_LAYOUT}")
            text = read_lines(path)
            pieces = vocab.spm.encode(text, out_type=str)
            sides.append([np.asarray([d.index(p) for p in ps] + [d.eos_index], dtype=np.int64) for ps in pieces])
            lines.append(text)
        if len(sides[0]) != len(sides[1]):
            raise UserError(f"{root}/{split}.{src} and .{tgt} have {len(sides[0])} vs {len(sides[1])} lines")
        sizes = [np.asarray([len(a) for a in s], dtype=np.int64) for s in sides]
        return ParallelData(sides[0], sides[1], sizes[0], sizes[1], raw_refs=lines[1])
    a = MMapIndexedDataset(root / f"{split}.{src}-{tgt}.{src}")
    b = MMapIndexedDataset(root / f"{split}.{src}-{tgt}.{tgt}")
    if len(a) != len(b):
        raise UserError(f"{a.prefix} has {len(a)} sentences but {b.prefix} has {len(b)}; expected aligned pairs")
    a.check_ids(len(vocab.src), f"dict.{src}.txt")  # a damaged prepared folder: one line, not an index error
    b.check_ids(len(vocab.tgt), f"dict.{tgt}.txt")
    refs_file = root / REFS.format(split=split, lang=tgt)
    refs = read_lines(refs_file) if refs_file.is_file() else None
    if refs is not None and len(refs) != len(b):
        raise UserError(f"{refs_file} has {len(refs)} lines but {b.prefix} has {len(b)} sentences; expected one a line")
    return ParallelData(a, b, a.sizes.astype(np.int64), b.sizes.astype(np.int64), raw_refs=refs)


def batch_by_size(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    max_tokens: int,
    seed: int = 0,
    max_positions: int | None = None,
) -> list[np.ndarray]:
    """fairseq's max-tokens batching: sort by (src, tgt) length, pack while max(len) * n <= max_tokens.
    Pairs that could never fit (longer than max_tokens or max_positions) are left out, as fairseq's
    --skip-invalid-size-inputs-valid-test does."""
    src_sizes, tgt_sizes = np.asarray(src_sizes, np.int64), np.asarray(tgt_sizes, np.int64)
    ntok = np.maximum(src_sizes, tgt_sizes)
    limit = max_tokens if max_positions is None else min(max_tokens, max_positions)
    order = np.random.default_rng(seed).permutation(len(ntok))
    order = order[np.argsort(tgt_sizes[order], kind="mergesort")]
    order = order[np.argsort(src_sizes[order], kind="mergesort")]
    order = order[ntok[order] <= limit]
    batches: list[np.ndarray] = []
    start, cur_max = 0, 0
    lens = ntok[order].tolist()
    for pos, n in enumerate(lens):
        m = max(cur_max, n)
        if pos > start and m * (pos - start + 1) > max_tokens:
            batches.append(order[start:pos])
            start, m = pos, n
        cur_max = m
    if start < len(order):
        batches.append(order[start:])
    return batches


def collate_pairs(pairs: Sequence[tuple[np.ndarray, np.ndarray]], pad: int, eos: int) -> dict[str, Any]:
    """Right-padded source, and fairseq's teacher forcing: the decoder input is the target with its final
    </s> moved to the front (`move_eos_to_beginning`), so it starts with </s>."""
    n = len(pairs)
    src_len = torch.tensor([len(s) for s, _ in pairs], dtype=torch.long)
    tgt_len = [len(t) for _, t in pairs]
    src = torch.full((n, int(src_len.max())), pad, dtype=torch.long)
    target = torch.full((n, max(tgt_len)), pad, dtype=torch.long)
    prev = torch.full((n, max(tgt_len)), pad, dtype=torch.long)
    for i, (s, t) in enumerate(pairs):
        s, t = torch.as_tensor(s, dtype=torch.long), torch.as_tensor(t, dtype=torch.long)
        src[i, : len(s)] = s
        target[i, : len(t)] = t
        prev[i, 0] = eos
        prev[i, 1 : len(t)] = t[:-1]
    return {
        "src_tokens": src,
        "src_lengths": src_len,
        "src_padding_mask": src.eq(pad),
        "prev_output_tokens": prev,
        "target": target,
        "ntokens": int(sum(tgt_len)),
        "pad": pad,
    }


@dataclass
class TokenBatches:
    """TrainSet whose every item is one whole precomputed max-tokens batch (items_per_microbatch = 1).
    No augmentation, so `key` is unused."""

    data: ParallelData
    batches: list[np.ndarray]
    pad: int
    eos: int

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, item: tuple[int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
        index, _key = item
        return [(self.data.src[i], self.data.tgt[i]) for i in self.batches[index].tolist()]

    def collate(self, samples: Sequence[list[tuple[np.ndarray, np.ndarray]]]) -> dict[str, Any]:
        return collate_pairs([p for batch in samples for p in batch], self.pad, self.eos)


@dataclass
class EvalSet:
    """The first `eval_max_sentences` pairs of the evaluation split, batched by tokens, with references."""

    data: ParallelData
    vocab: Vocab
    indices: np.ndarray
    batches: list[np.ndarray]
    refs: dict[int, str] = field(default_factory=dict)

    def detok(self, ids: Sequence[int], escape_unk: bool = False) -> str:
        """Token ids -> text: drop special symbols, join subwords (fairseq's `Dictionary.string`)."""
        return self.vocab.tgt.string(ids, self.vocab.bpe, escape_unk=escape_unk)


def make_eval_set(root: Path, data_cfg: dict[str, Any], vocab: Vocab, max_tokens: int) -> EvalSet:
    data = load_split(root, data_cfg, data_cfg["eval_split"], vocab)
    limit = data_cfg.get("eval_max_sentences")
    n = len(data) if not limit else min(len(data), int(limit))
    indices = np.arange(n)
    sub_src, sub_tgt = data.src_sizes[:n], data.tgt_sizes[:n]
    # evaluation keeps every sentence: a sentence longer than the budget gets a batch of its own
    budget = max(max_tokens, int(np.maximum(sub_src, sub_tgt).max(initial=1)))
    batches = batch_by_size(sub_src, sub_tgt, budget, seed=0)
    refs = {}
    for i in indices.tolist():
        # fairseq-generate escapes <unk> in references so an unknown word never counts as a match
        refs[i] = (
            data.raw_refs[i] if data.raw_refs is not None else vocab.tgt.string(data.tgt[i], vocab.bpe, escape_unk=True)
        )
    return EvalSet(data, vocab, indices, batches, refs)

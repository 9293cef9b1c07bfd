"""Random max-tokens batches of the transformer's real shapes, for `adascale-bench perf --synthetic`
(no WMT data).

A batch is what `data.TokenBatches.collate` returns (the task's loss reads it): `collate_pairs` over
(source, target) token arrays ending in </s>, with fairseq's special indices (<pad> = 1, </s> = 2).
Like `data.batch_by_size`, a batch packs sentences of about one length up to the preset's batch_size
tokens: its longest sentence L is drawn from the preset's length range, it holds batch_size // L pairs,
and each side's length is drawn from [shortest, L]. Token ids are uniform over the dictionary's
non-special symbols.

The dictionary's size comes from the data, not the preset, so it is fixed here:
`data.synthetic_vocab` symbols (default 32 000, about a joint BPE dictionary of WMT14 en-de; the tiny
preset: the toy corpus's 44) plus the 4 specials, padded to a multiple of 8 as fairseq-preprocess pads
(32 008 entries), one joint dictionary (shared embeddings, as --joined-dictionary). Sentence lengths,
</s> included: `data.synthetic_lengths` (default [25, 30], about WMT14 en-de's mean BPE sentence; tiny:
[4, 8], the toy corpus's range).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from bench.core.runspec import RunSpec

from . import make_model
from .data import collate_pairs
from .dictionary import Dictionary

SYNTHETIC_VOCAB = 32_000  # symbols besides the specials (paper preset)
TINY_VOCAB = 44  # the toy corpus of tiny.py: 48 entries = 4 specials + 44 symbols (no padding needed)
LENGTHS = (25, 30)
TINY_LENGTHS = (4, 8)
_SPECIALS = Dictionary()  # <s>, <pad>, </s>, <unk> at fairseq's indices


def vocab_size(cfg: RunSpec) -> int:
    """Entries of the synthetic joint dictionary: the symbols, the 4 specials, padded to a multiple of 8."""
    default = TINY_VOCAB if cfg.preset == "tiny" else SYNTHETIC_VOCAB
    n = int(cfg.data.get("synthetic_vocab") or default) + _SPECIALS.nspecial
    return -(-n // 8) * 8


def lengths(cfg: RunSpec) -> tuple[int, int]:
    """(shortest, longest) sentence length in tokens, </s> included, within max_positions."""
    default = TINY_LENGTHS if cfg.preset == "tiny" else LENGTHS
    lo, hi = (int(x) for x in (cfg.data.get("synthetic_lengths") or default))
    hi = min(hi, int(cfg.model["max_positions"]), int(cfg.batch_size))
    return min(lo, hi), hi


def build_model(cfg: RunSpec) -> nn.Module:
    """The preset's model over the synthetic joint dictionary."""
    n = vocab_size(cfg)
    return make_model(cfg, n, n, _SPECIALS.pad_index, True)


def synthetic_batch(cfg: RunSpec, generator: torch.Generator, items: int | None = None) -> dict[str, Any]:
    """The collated batch of `items` TrainSet items (default 1, one micro-batch): max-tokens batches."""
    lo, hi = lengths(cfg)
    first, vocab = _SPECIALS.nspecial, vocab_size(cfg)
    pairs = []
    for _ in range(items or 1):
        longest = int(torch.randint(lo, hi + 1, (), generator=generator))
        n = max(1, int(cfg.batch_size) // longest)
        sizes = torch.randint(lo, longest + 1, (n, 2), generator=generator)
        sizes[0, 0] = longest  # the batch's longest sentence
        for src_len, tgt_len in sizes.tolist():
            src, tgt = (torch.randint(first, vocab, (k,), generator=generator) for k in (src_len, tgt_len))
            src[-1] = tgt[-1] = _SPECIALS.eos_index
            pairs.append((src.numpy().astype(np.int64), tgt.numpy().astype(np.int64)))
    return collate_pairs(pairs, _SPECIALS.pad_index, _SPECIALS.eos_index)

"""Transformer base on WMT14 en-de (fairseq-binarized data read natively), BLEU with sacrebleu.

Two BLEU numbers per evaluation (see `bleu_scores`): `bleu`, detokenised sacreBLEU (signature
`BLEU_SIGNATURE`, the number to quote today), and `bleu_tok`, tokenised BLEU with compound splitting as
Vaswani et al. and fairseq's compound_split_bleu.sh report it: the number that compares with the
paper's ~27 on newstest2014.

fairseq itself does not import on Python 3.11 (docs/design.md §2), so its data format is read by this package:
dictionary.py (Dictionary conventions), indexed.py (mmap .bin/.idx), data.py (pairs and batching).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from torch import nn

from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks.presets.transformer import CARD
from tasks.synthetic import SyntheticBatches, synthetic_module

from ..base import FloatSum, Task, shard
from . import data as D
from .model import TransformerNMT, beam_search, greedy_decode
from .tiny import write_tiny as _write_tiny

_TOK13A = Tokenizer13a()
LABEL_SMOOTHING = 0.1  # Vaswani et al. 2017, §5.4


def smoothed_nll(logits: torch.Tensor, target: torch.Tensor, pad: int) -> torch.Tensor:
    """Label-smoothed cross-entropy averaged over the non-<pad> target tokens."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad,
        label_smoothing=LABEL_SMOOTHING,
    )


def _detok_bleu() -> BLEU:
    """sacrebleu's corpus BLEU with its defaults (13a tokenisation, exp smoothing) on detokenised text."""
    return BLEU(tokenize="13a")


def _tok_bleu() -> BLEU:
    """BLEU on tokens as they are, unsmoothed like fairseq-score / multi-bleu.perl."""
    return BLEU(tokenize="none", smooth_method="none", force=True)


def corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    return float(_detok_bleu().corpus_score(hyps, [refs]).score)


# sacrebleu's signature of `bleu` (less its `version:` field, which summary.json's versions cannot carry):
# the string that says how the number was computed. tests/tasks check it against sacrebleu's own.
BLEU_SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"
BLEU_TOK_SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:none|smooth:none (13a-tokenised, compound-split input)"
_MOSES_HYPHEN = re.compile(r"\s*@-@\s*")  # Moses' aggressive hyphen splitting: "a @-@ b" -> "a-b"
_COMPOUND = re.compile(r"(\S)-(\S)")  # compound_split_bleu.sh's perl: s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g


def compound_split(tokenised: str) -> str:
    """Hyphenated compounds split as fairseq's compound_split_bleu.sh does: "a-b" -> "a ##AT##-##AT## b".
    Same regex, same non-overlapping global replacement (so "a-b-c" -> "a ##AT##-##AT## b-c", like perl)."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenised)


def _tokenise(line: str) -> str:
    return compound_split(_TOK13A(_MOSES_HYPHEN.sub("-", line.strip())))


def tokenised_bleu(hyps: list[str], refs: list[str]) -> float:
    """Tokenised BLEU with compound splitting (the paper's ~27-point numbers): both sides 13a-tokenised
    (Moses' "@-@" joined first), hyphenated compounds split, then BLEU on the tokens as they are."""
    return float(_tok_bleu().corpus_score([_tokenise(h) for h in hyps], [[_tokenise(r) for r in refs]]).score)


def bleu_scores(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """{"bleu": detokenised sacreBLEU, "bleu_tok": tokenised compound-split BLEU}."""
    return {"bleu": corpus_bleu(hyps, refs), "bleu_tok": tokenised_bleu(hyps, refs)}


def bleu_statistics(hyps: list[str], refs: list[str], tokenised: bool = False) -> list[int]:
    """Corpus BLEU's sufficient statistics: [hypothesis length, reference length, matches of 1..4-grams,
    hypothesis 1..4-grams]. Sums over disjoint parts of a corpus are the whole corpus's (sharded eval)."""
    if not hyps:
        return [0] * 10
    if tokenised:
        hyps, refs = [_tokenise(h) for h in hyps], [_tokenise(r) for r in refs]
    score = (_tok_bleu() if tokenised else _detok_bleu()).corpus_score(hyps, [refs])
    return [score.sys_len, score.ref_len, *score.counts, *score.totals]


def bleu_from_statistics(stats: list[int], tokenised: bool = False) -> float:
    """Corpus BLEU from summed statistics: what corpus_score gives on the corpus they were summed over."""
    bleu = _tok_bleu() if tokenised else _detok_bleu()
    stats = [int(v) for v in stats]
    return float(
        BLEU.compute_bleu(
            correct=stats[2:6],
            total=stats[6:10],
            sys_len=stats[0],
            ref_len=stats[1],
            smooth_method=bleu.smooth_method,
            smooth_value=bleu.smooth_value,
        ).score
    )


def make_model(cfg: RunSpec, src_vocab: int, tgt_vocab: int, pad: int, joint: bool) -> TransformerNMT:
    """The preset's TransformerNMT for dictionaries of these sizes (shared embeddings when `joint`)."""
    m = cfg.model
    return TransformerNMT(
        src_vocab,
        tgt_vocab,
        pad,
        joint,
        encoder_layers=m["encoder_layers"],
        decoder_layers=m["decoder_layers"],
        d_model=m["d_model"],
        ffn_dim=m["ffn_dim"],
        heads=m["heads"],
        dropout=m["dropout"],
        max_positions=m["max_positions"],
        norm_first=bool(m.get("norm_first", False)),
    )


class Transformer(Task):
    card = CARD

    def __init__(self) -> None:
        self._vocab: dict[str, D.Vocab] = {}

    def items_per_microbatch(self, cfg: RunSpec) -> int:
        return 1  # each TrainSet item is one whole max-tokens batch

    def write_tiny(self, root: Path) -> None:
        _write_tiny(Path(root))

    def _vocab_for(self, root: Path, cfg: RunSpec) -> D.Vocab:
        key = str(Path(root).resolve())
        if key not in self._vocab:
            self._vocab[key] = D.load_vocab(root, cfg.data)
        return self._vocab[key]

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        D.check_layout(root, cfg.data)
        self._vocab_for(root, cfg)  # dictionary errors surface here; build_model needs its size

    def synthetic_set(self, cfg: RunSpec) -> SyntheticBatches:
        """perf --synthetic: batches of the preset's shapes (tasks/transformer/synthetic.py, loaded when asked)."""
        return SyntheticBatches(partial(synthetic_module(__name__).synthetic_batch, cfg))

    def synthetic_model(self, cfg: RunSpec) -> nn.Module:
        """perf --synthetic: the model at the synthetic data's vocabulary (no dictionary on disk)."""
        return synthetic_module(__name__).build_model(cfg)

    def build_model(self, cfg: RunSpec) -> nn.Module:
        # the vocabulary size is a property of the data: take it from the root check_data just read
        root = cfg.data_root
        if root is not None:
            vocab = self._vocab_for(Path(root), cfg)
        elif self._vocab:
            vocab = list(self._vocab.values())[-1]
        else:
            raise UserError("transformer: call check_data(root, cfg) before build_model (vocabulary size)")
        return make_model(cfg, len(vocab.src), len(vocab.tgt), vocab.tgt.pad_index, vocab.joint)

    def train_set(self, cfg: RunSpec, root: Path) -> D.TokenBatches:
        vocab = self._vocab_for(root, cfg)
        data_cfg = cfg.data
        split = D.load_split(root, data_cfg, data_cfg["train_split"], vocab)
        batches = D.batch_by_size(
            split.src_sizes,
            split.tgt_sizes,
            int(cfg.batch_size),
            int(cfg.seed),
            cfg.model["max_positions"],
        )
        if not batches:
            raise UserError(f"{root}: no training pair fits {cfg.batch_size} tokens; expected shorter sentences")
        return D.TokenBatches(split, batches, vocab.tgt.pad_index, vocab.tgt.eos_index)

    def eval_set(self, cfg: RunSpec, root: Path) -> D.EvalSet:
        data_cfg = cfg.data
        return D.make_eval_set(root, data_cfg, self._vocab_for(root, cfg), int(data_cfg["eval_max_tokens"]))

    def loss(self, model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        logits = model(batch["src_tokens"], batch["prev_output_tokens"])
        return smoothed_nll(logits, batch["target"], int(batch["pad"]))

    def eval_stats(
        self,
        model: nn.Module,
        evalset: D.EvalSet,
        cfg: RunSpec,
        device: torch.device,
        rank: int = 0,
        world: int = 1,
    ) -> dict[str, Any]:
        """BLEU's statistics of this rank's block of eval batches (decoded as in one process: the same
        batches), and the token-weighted label-smoothed loss."""
        m, tgt = cfg.model, evalset.vocab.tgt
        hyps: dict[int, str] = {}
        loss_sum, tok_sum = FloatSum(), 0
        for b in shard(len(evalset.batches), rank, world):
            idx = evalset.batches[b]
            pairs = [(evalset.data.src[i], evalset.data.tgt[i]) for i in idx.tolist()]
            batch = D.collate_pairs(pairs, tgt.pad_index, tgt.eos_index)
            src = batch["src_tokens"].to(device)
            logits = model(src, batch["prev_output_tokens"].to(device))
            ntok = batch["ntokens"]
            loss_sum.append(float(smoothed_nll(logits, batch["target"].to(device), tgt.pad_index)) * ntok)
            tok_sum += ntok
            if int(m.get("beam", 1)) > 1:
                out = beam_search(
                    model,
                    src,
                    tgt.eos_index,
                    tgt.bos_index,
                    beam=int(m["beam"]),
                    lenpen=float(m["lenpen"]),
                    max_len_a=float(m["max_len_a"]),
                    max_len_b=int(m["max_len_b"]),
                )
            else:
                out = greedy_decode(
                    model, src, tgt.eos_index, tgt.bos_index, float(m["max_len_a"]), int(m["max_len_b"])
                )
            for i, ids in zip(idx.tolist(), out, strict=True):
                hyps[i] = evalset.detok(ids)
        order = sorted(hyps)
        hyps_in_order, refs = [hyps[i] for i in order], [evalset.refs[i] for i in order]
        return {
            "bleu_stats": bleu_statistics(hyps_in_order, refs),
            "bleu_tok_stats": bleu_statistics(hyps_in_order, refs, tokenised=True),
            "loss_sum": loss_sum,
            "tokens": tok_sum,
        }

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        return {
            "bleu": bleu_from_statistics(stats["bleu_stats"]),
            "bleu_tok": bleu_from_statistics(stats["bleu_tok_stats"], tokenised=True),
            "loss": stats["loss_sum"] / max(int(stats["tokens"]), 1),
        }

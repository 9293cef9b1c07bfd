"""Transformer base on WMT14 en-de (fairseq-binarized data read natively), BLEU with sacrebleu.

fairseq itself does not import on Python 3.11 (DESIGN §2), so its data format is read by this package:
dictionary.py (Dictionary conventions), indexed.py (mmap .bin/.idx), data.py (pairs and batching).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sacrebleu
import torch
import torch.nn.functional as F
from sacrebleu.metrics.bleu import BLEU, MAX_NGRAM_ORDER
from torch import nn

from bench.errors import UserError
from tasks.presets.transformer import CARD

from ..base import Task, shard
from . import data as D
from .model import TransformerNMT, beam_search, greedy_decode
from .tiny import write_tiny as _write_tiny

LABEL_SMOOTHING = 0.1  # Vaswani et al. 2017, §5.4


def smoothed_nll(logits: torch.Tensor, target: torch.Tensor, pad: int) -> torch.Tensor:
    """Label-smoothed cross-entropy averaged over the non-<pad> target tokens."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad,
        label_smoothing=LABEL_SMOOTHING,
    )


def corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    """sacrebleu's corpus BLEU with its defaults (13a tokenisation, exp smoothing)."""
    return float(sacrebleu.corpus_bleu(hyps, [refs]).score)


def _bleu() -> BLEU:
    """The metric sacrebleu.corpus_bleu builds with its defaults."""
    return BLEU(tokenize=BLEU.TOKENIZER_DEFAULT)


def bleu_statistics(hyps: list[str], refs: list[str]) -> list[int]:
    """Corpus BLEU's sufficient statistics, summed over the sentences: [hypothesis length, reference
    length, matches of 1..4-grams, hypothesis 1..4-grams] (sacrebleu's per-segment statistics, which its
    corpus_score sums the same way). Sums over disjoint parts add up to those of the whole corpus."""
    if not hyps:
        return [0] * (2 + 2 * MAX_NGRAM_ORDER)
    segments = _bleu()._extract_corpus_statistics(hyps, [refs])
    return [int(sum(col)) for col in zip(*segments, strict=True)]


def bleu_from_statistics(stats: list[int]) -> float:
    """Corpus BLEU from summed statistics: what corpus_bleu gives on the corpus they were summed over."""
    return float(_bleu()._compute_score_from_stats([int(v) for v in stats]).score)


class Transformer(Task):
    card = CARD

    def __init__(self) -> None:
        self._vocab: dict[str, D.Vocab] = {}

    def items_per_microbatch(self, cfg: dict[str, Any]) -> int:
        return 1  # each TrainSet item is one whole max-tokens batch

    def write_tiny(self, root: Path) -> None:
        _write_tiny(Path(root))

    def _vocab_for(self, root: Path, cfg: dict[str, Any]) -> D.Vocab:
        key = str(Path(root).resolve())
        if key not in self._vocab:
            self._vocab[key] = D.load_vocab(root, cfg["data"])
        return self._vocab[key]

    def check_data(self, root: Path, cfg: dict[str, Any]) -> None:
        D.check_layout(root, cfg["data"])
        self._vocab_for(root, cfg)  # dictionary errors surface here; build_model needs its size

    def build_model(self, cfg: dict[str, Any]) -> nn.Module:
        # the vocabulary size is a property of the data: take it from the root check_data just read
        root = cfg.get("data_root")
        if root is not None:
            vocab = self._vocab_for(Path(root), cfg)
        elif self._vocab:
            vocab = list(self._vocab.values())[-1]
        else:
            raise UserError("transformer: call check_data(root, cfg) before build_model (vocabulary size)")
        m = cfg["model"]
        return TransformerNMT(
            len(vocab.src),
            len(vocab.tgt),
            vocab.tgt.pad_index,
            vocab.joint,
            encoder_layers=m["encoder_layers"],
            decoder_layers=m["decoder_layers"],
            d_model=m["d_model"],
            ffn_dim=m["ffn_dim"],
            heads=m["heads"],
            dropout=m["dropout"],
            max_positions=m["max_positions"],
            norm_first=bool(m.get("norm_first", False)),
        )

    def train_set(self, cfg: dict[str, Any], root: Path) -> D.TokenBatches:
        vocab = self._vocab_for(root, cfg)
        data_cfg = cfg["data"]
        split = D.load_split(root, data_cfg, data_cfg["train_split"], vocab)
        batches = D.batch_by_size(
            split.src_sizes,
            split.tgt_sizes,
            int(cfg["batch_size"]),
            int(cfg.get("seed", 0)),
            cfg["model"]["max_positions"],
        )
        if not batches:
            raise UserError(f"{root}: no training pair fits {cfg['batch_size']} tokens; expected shorter sentences")
        return D.TokenBatches(split, batches, vocab.tgt.pad_index, vocab.tgt.eos_index)

    def eval_set(self, cfg: dict[str, Any], root: Path) -> D.EvalSet:
        data_cfg = cfg["data"]
        return D.make_eval_set(root, data_cfg, self._vocab_for(root, cfg), int(data_cfg["eval_max_tokens"]))

    def loss(self, model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        logits = model(batch["src_tokens"], batch["prev_output_tokens"])
        return smoothed_nll(logits, batch["target"], int(batch["pad"]))

    def eval_stats(
        self,
        model: nn.Module,
        evalset: D.EvalSet,
        cfg: dict[str, Any],
        device: torch.device,
        rank: int = 0,
        world: int = 1,
    ) -> dict[str, Any]:
        """BLEU's statistics of this rank's block of eval batches (decoded as in one process: the same
        batches), and the token-weighted label-smoothed loss."""
        m, tgt = cfg["model"], evalset.vocab.tgt
        hyps: dict[int, str] = {}
        loss_sum, tok_sum = 0.0, 0
        for b in shard(len(evalset.batches), rank, world):
            idx = evalset.batches[b]
            pairs = [(evalset.data.src[i], evalset.data.tgt[i]) for i in idx.tolist()]
            batch = D.collate_pairs(pairs, tgt.pad_index, tgt.eos_index)
            src = batch["src_tokens"].to(device)
            logits = model(src, batch["prev_output_tokens"].to(device))
            ntok = batch["ntokens"]
            loss_sum += float(smoothed_nll(logits, batch["target"].to(device), tgt.pad_index)) * ntok
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
        bleu = bleu_statistics([hyps[i] for i in order], [evalset.refs[i] for i in order])
        return {"bleu_stats": bleu, "loss_sum": loss_sum, "tokens": tok_sum}

    def metrics_from(self, stats: dict[str, Any], cfg: dict[str, Any]) -> dict[str, float]:
        return {
            "bleu": bleu_from_statistics(stats["bleu_stats"]),
            "loss": stats["loss_sum"] / max(int(stats["tokens"]), 1),
        }

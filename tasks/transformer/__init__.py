"""Transformer base on WMT14 en-de (fairseq-binarized data read natively), BLEU with sacrebleu.

fairseq itself does not import on Python 3.11 (DESIGN §2), so its data format is read by this package:
dictionary.py (Dictionary conventions), indexed.py (mmap .bin/.idx), data.py (pairs and batching).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import sacrebleu
import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import UserError

from ..base import Task
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


class Transformer(Task):
    name = "transformer"
    metric = "bleu"
    metric_label = "BLEU"
    higher_is_better = True
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {
            "T1": 1_550_000,  # paper (Table 1)
            "batch_size": 2048,  # paper: b = 2048 tokens per batch at S = 1 (max-tokens batches)
            "lr_schedule": {
                "kind": "step",  # paper: step decay family
                "lr0": 0.01,  # chosen: with momentum 0.99 an effective step lr0/(1-rho) = 1.0, the
                # usual SGD scale for post-norm Transformers; the supplement's value is not available
                "gamma": 0.1,  # chosen: the customary x0.1 step
                "milestones": [0.5, 0.75],  # chosen: half and three quarters of T1
            },
            "momentum": 0.99,  # paper
            "weight_decay": 0.0,  # chosen: Vaswani et al. and fairseq's WMT en-de recipe use none
            "scales": [1, 16, 32, 64, 128],  # paper (Table 2)
            "elastic": {
                "up": [[0.0, 32], [0.25, 64], [0.5, 128]],
                "down": [[0.0, 128], [0.25, 64], [0.5, 32]],
            },
            "eval_every": 77_500.0,  # chosen: 20 evaluations per run (T1 / 20)
            "checkpoint_every": 5000,  # chosen
            "num_workers": 2,  # chosen: batches are precomputed; workers only gather memory-mapped tokens
            "model": {  # paper: Transformer base
                "encoder_layers": 6,
                "decoder_layers": 6,
                "d_model": 512,
                "ffn_dim": 2048,
                "heads": 8,
                "dropout": 0.1,
                "max_positions": 1024,  # fairseq's default max source/target positions
                "norm_first": False,  # paper: post-norm residual blocks
                "beam": 4,  # paper: beam 4, length penalty 0.6, max output length = input + 50
                "lenpen": 0.6,
                "max_len_a": 1.0,
                "max_len_b": 50,
            },
            "data": {
                # fairseq examples/translation/prepare-wmt14en2de.sh + fairseq-preprocess --joined-dictionary
                "format": "fairseq",
                "src": "en",
                "tgt": "de",
                "train_split": "train",
                "eval_split": "test",  # newstest2014, the set the paper reports
                "eval_max_sentences": 3003,  # all of newstest2014
                "eval_max_tokens": 8192,  # chosen: decoding batch budget
                "bpe": "subword_nmt",  # undo "@@ " before BLEU
            },
        },
        "tiny": {
            # tiny values are chosen, not the paper's: at S = 1 greedy BLEU reaches ~50 on the toy corpus in
            # 150 SGD steps (measured; about 0 after T1/4, 15-25 after T1/2)
            "T1": 150,
            "batch_size": 320,  # tokens per micro-batch (~45 toy sentences)
            "lr_schedule": {"kind": "step", "lr0": 0.15, "gamma": 0.1, "milestones": [0.75]},
            "momentum": 0.9,  # chosen: 0.99's ~100-iteration memory is as long as the whole tiny run
            "weight_decay": 0.0,
            "scales": [1, 2, 4, 8],
            "elastic": {"up": [[0.0, 2], [0.25, 4], [0.5, 8]], "down": [[0.0, 8], [0.25, 4], [0.5, 2]]},
            "eval_every": 37.5,  # T1 / 4
            "checkpoint_every": 50,
            "num_workers": 0,
            "model": {
                "encoder_layers": 2,
                "decoder_layers": 2,
                "d_model": 64,
                "ffn_dim": 128,
                "heads": 4,
                "dropout": 0.1,
                "max_positions": 64,
                # chosen: post-norm (the paper's) stays on the unigram plateau for 150 plain-SGD steps
                # without warm-up at every lr tried (0.1-0.5; 1.0 diverges); pre-norm learns
                "norm_first": True,
                "beam": 1,  # greedy
                "lenpen": 0.6,
                "max_len_a": 1.0,
                "max_len_b": 5,
            },
            "data": {
                "format": "fairseq",
                "src": "en",
                "tgt": "de",
                "train_split": "train",
                "eval_split": "valid",
                "eval_max_sentences": 100,
                "eval_max_tokens": 1024,
                "bpe": "subword_nmt",
            },
        },
    }

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

    def evaluate(self, model: nn.Module, evalset: D.EvalSet, cfg: dict[str, Any], device: torch.device) -> dict:
        m, tgt = cfg["model"], evalset.vocab.tgt
        hyps: dict[int, str] = {}
        loss_sum, tok_sum = 0.0, 0
        for idx in evalset.batches:
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
        bleu = corpus_bleu([hyps[i] for i in order], [evalset.refs[i] for i in order])
        return {"bleu": bleu, "loss": loss_sum / max(tok_sum, 1)}

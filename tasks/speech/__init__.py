"""speech: DeepSpeech2 on LibriSpeech with CTC (DESIGN §2, the paper's speech row).

Loss: torch's CTC loss on float32 log-probabilities, summed over each utterance's frames (its negative
log-likelihood) and averaged over the micro-batch's utterances. zero_infinity stays False: utterances
CTC cannot align are removed from training when the data is read (see data.py), so a non-finite loss
can only come from the model blowing up, and the engine then ends the run as `diverged`.

Metric: word accuracy = 100 - WER (%), corpus-level, greedy (best-path) decoding, no language model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tasks.base import Task

from . import data
from .model import build, output_frames
from .text import BLANK, ErrorCounts, decode, greedy_decode
from .tiny import write_tiny

_PAPER: dict[str, Any] = {
    # Paper (Table 2, S = 1). At b = 32 that is 2.7M utterances, ~9.7 passes over LibriSpeech's 960 h
    # (281k utterances), a usual DS2 budget; over train-clean-100 alone it would be ~95 epochs, so the
    # preset trains on all 960 h.
    "T1": 84800,
    "batch_size": 32,  # paper
    # Family from the paper (exponential decay). lr0 and decay chosen: deepspeech.pytorch's LibriSpeech
    # recipe (SGD, momentum 0.9, lr 3e-4 on the per-utterance CTC loss averaged over the batch, divided
    # by 1.1 after each epoch); over the ~9.7 epochs of T1 that is a total decrease of 1.1**-9.7 = 0.4.
    "lr_schedule": {"kind": "exponential", "lr0": 3e-4, "decay": 0.4},
    "momentum": 0.9,  # paper
    "weight_decay": 1e-5,  # chosen: a light L2, as public DS2 recipes use; the paper's value is not known
    "scales": [1, 4, 8, 16, 32],  # paper
    # Elastic 32 -> 64 -> 128 and back, at T1/4 and T1/2: DESIGN §1 (the paper ran elastic on imagenet).
    "elastic": {"up": [[0.0, 32], [0.25, 64], [0.5, 128]], "down": [[0.0, 128], [0.25, 64], [0.5, 32]]},
    "eval_every": 4240,  # chosen: T1/20, about every half pass over the 960 h
    "checkpoint_every": 1000,  # chosen: a preempted run loses minutes, not hours
    "num_workers": 8,  # chosen: each item decodes 32 flac files and computes their spectrograms
    # DS2 sizes, see model.py: the paper's 2-layer 2-D conv front end (Table 4) and deepspeech.pytorch's
    # 5 x 1024 bidirectional LSTM stack.
    "model": {
        "conv_channels": [32, 32],
        "conv_kernels": [[41, 11], [21, 11]],
        "conv_strides": [[2, 2], [2, 1]],
        "rnn": "lstm",
        "hidden": 1024,
        "layers": 5,
    },
    # LibriSpeech's 16 kHz audio; 20 ms windows every 10 ms, linear spectrogram (DS2's features).
    # eval_split: validation on dev-clean (test-clean is for a final number). max_duration_s: none,
    # every LibriSpeech utterance is at most ~35 s. cache_features: off, 960 h do not fit in memory.
    "data": {
        "train_split": "train-960",
        "eval_split": "dev-clean",
        "sample_rate": 16000,
        "features": "linear",
        "window_s": 0.02,
        "hop_s": 0.01,
        "n_mels": None,
        "max_duration_s": None,
        "eval_batch_size": 32,
        "cache_features": False,
    },
}

# Tiny: the same code at toy sizes, on the tone corpus of tiny.py (160 training utterances of 1-3 words,
# 32 dev). 32 log-mel bins at 8 kHz, 8-channel conv front end, 2 bidirectional GRU layers of 64:
# one forward+backward of 8 utterances takes ~40 ms on one (shared) CPU core. lr0 by a short search at S = 1;
# the run reaches ~80 % word accuracy on the unseen dev speakers in its 100 iterations.
_TINY: dict[str, Any] = {
    "T1": 100,
    "batch_size": 8,
    "lr_schedule": {"kind": "exponential", "lr0": 0.004, "decay": 0.1},
    "momentum": 0.9,
    "weight_decay": 0.0,
    "scales": [1, 2, 4, 8],
    "elastic": {"up": [[0.0, 2], [0.25, 4], [0.5, 8]], "down": [[0.0, 8], [0.25, 4], [0.5, 2]]},
    "eval_every": 25,
    "checkpoint_every": 25,
    "num_workers": 0,
    "model": {
        "conv_channels": [8, 8],
        "conv_kernels": [[11, 5], [11, 5]],
        "conv_strides": [[2, 2], [2, 1]],
        "rnn": "gru",
        "hidden": 64,
        "layers": 2,
    },
    "data": {
        "train_split": "train-clean-100",
        "eval_split": "dev-clean",
        "sample_rate": 8000,
        "features": "mel",
        "window_s": 0.02,
        "hop_s": 0.01,
        "n_mels": 32,
        "max_duration_s": None,
        "eval_batch_size": 16,
        "cache_features": True,
    },
}


def features_of(cfg: dict[str, Any]) -> data.Features:
    d = cfg["data"]
    return data.Features(
        int(d["sample_rate"]),
        d.get("features", "linear"),
        float(d.get("window_s", 0.02)),
        float(d.get("hop_s", 0.01)),
        d.get("n_mels"),
    )


def ctc_loss(
    log_probs: torch.Tensor,
    out_lengths: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """Per-utterance CTC negative log-likelihood; "mean" averages it over the utterances, "none" keeps it.
    zero_infinity=False on purpose: an infinite or NaN loss must reach the engine."""
    per_utt = F.ctc_loss(
        log_probs, targets, out_lengths, target_lengths, blank=BLANK, reduction="none", zero_infinity=False
    )
    return per_utt.mean() if reduction == "mean" else per_utt


class Speech(Task):
    """DeepSpeech2 on LibriSpeech folders (flac + *.trans.txt), character CTC, word accuracy."""

    name = "speech"
    metric = "word_acc"
    metric_label = "word accuracy %"
    higher_is_better = True
    presets: ClassVar[dict[str, dict[str, Any]]] = {"paper": _PAPER, "tiny": _TINY}

    def items_per_microbatch(self, cfg: dict[str, Any]) -> int:
        return 1  # each item is a whole length-bucketed batch of b utterances

    def write_tiny(self, root: Path) -> None:
        write_tiny(root)

    def check_data(self, root: Path, cfg: dict[str, Any]) -> None:
        data.check_layout(Path(root), [cfg["data"]["train_split"], cfg["data"]["eval_split"]])

    def build_model(self, cfg: dict[str, Any]) -> nn.Module:
        return build(features_of(cfg).num_features, cfg["model"])

    def train_set(self, cfg: dict[str, Any], root: Path) -> data.TrainSet:
        d, feats = cfg["data"], features_of(cfg)
        utts = data.read_split(Path(root), d["train_split"], int(d["sample_rate"]))
        if d.get("max_duration_s"):
            utts = [u for u in utts if u.num_samples <= float(d["max_duration_s"]) * int(d["sample_rate"])]
        utts = data.trainable(utts, feats, lambda n: output_frames(n, cfg["model"]))
        return data.TrainSet(
            utts, int(cfg["batch_size"]), feats, drop_last=True, cache=bool(d.get("cache_features", False))
        )

    def eval_set(self, cfg: dict[str, Any], root: Path) -> data.EvalSet:
        d = cfg["data"]
        utts = data.read_split(Path(root), d["eval_split"], int(d["sample_rate"]))
        return data.EvalSet(
            utts,
            int(d.get("eval_batch_size", cfg["batch_size"])),
            features_of(cfg),
            drop_last=False,
            cache=bool(d.get("cache_features", False)),
        )

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        log_probs, out_lengths = model(batch["features"], batch["feature_lengths"])
        return ctc_loss(log_probs, out_lengths, batch["targets"], batch["target_lengths"])

    def evaluate(self, model: nn.Module, evalset: Any, cfg: dict[str, Any], device: torch.device) -> dict:
        """Corpus WER/CER of greedy decoding over the whole eval split, and the mean CTC loss over the
        utterances CTC can align (all of them in LibriSpeech's dev/test splits)."""
        workers = int(cfg.get("num_workers", 0))
        batches = DataLoader(evalset, batch_size=None, num_workers=workers) if workers else evalset
        counts, loss_sum, loss_n = ErrorCounts(), 0.0, 0
        for batch in batches:
            log_probs, out_lengths = model(batch["features"].to(device), batch["feature_lengths"].to(device))
            per_utt = ctc_loss(
                log_probs,
                out_lengths,
                batch["targets"].to(device),
                batch["target_lengths"].to(device),
                reduction="none",
            ).cpu()
            targets = batch["targets"].split(batch["target_lengths"].tolist())
            for i, (text, hyp) in enumerate(zip(batch["texts"], greedy_decode(log_probs, out_lengths), strict=True)):
                counts.add(text, decode(hyp))
                if data.ctc_feasible(targets[i].tolist(), int(out_lengths[i])):
                    loss_sum += float(per_utt[i])
                    loss_n += 1
        return {
            "word_acc": 100.0 - counts.wer,
            "wer": counts.wer,
            "cer": counts.cer,
            "loss": loss_sum / max(loss_n, 1),
        }

"""speech: DeepSpeech2 on LibriSpeech with CTC (docs/design.md §2, the paper's speech row).

Loss: torch's CTC loss on float32 log-probabilities, summed over each utterance's frames (its negative
log-likelihood) and averaged over the micro-batch's utterances. zero_infinity stays False: utterances
CTC cannot align are removed from training when the data is read (see data.py), so a non-finite loss
can only come from the model blowing up, and the engine then ends the run as `diverged`.

Metric: word accuracy = 100 - WER (%), corpus-level, greedy (best-path) decoding, no language model.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Subset

from bench.core.runspec import RunSpec
from tasks.base import FloatSum, Task, shard
from tasks.presets.speech import CARD
from tasks.synthetic import SyntheticBatches, synthetic_module

from . import data
from .model import build, output_frames
from .text import BLANK, ErrorCounts, decode, greedy_decode
from .tiny import write_tiny


def features_of(cfg: RunSpec) -> data.Features:
    d = cfg.data
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

    card = CARD

    def items_per_microbatch(self, cfg: RunSpec) -> int:
        return 1  # each item is a whole length-bucketed batch of b utterances

    def write_tiny(self, root: Path) -> None:
        write_tiny(root)

    def check_data(self, root: Path, cfg: RunSpec) -> None:
        data.check_layout(Path(root), [cfg.data["train_split"], cfg.data["eval_split"]])

    def synthetic_set(self, cfg: RunSpec) -> SyntheticBatches:
        """perf --synthetic: batches of the preset's shapes (tasks/speech/synthetic.py, loaded when asked)."""
        return SyntheticBatches(partial(synthetic_module(__name__).synthetic_batch, cfg))

    def build_model(self, cfg: RunSpec) -> nn.Module:
        return build(features_of(cfg).num_features, cfg.model)

    def samples(self, cfg: RunSpec, root: Path, split: str) -> list[data.Utterance]:
        """Every utterance of the train or eval split: from its manifest, else from the flac headers."""
        d = cfg.data
        return data.read_split(
            Path(root), d["train_split" if split == "train" else "eval_split"], int(d["sample_rate"])
        )

    def train_set(self, cfg: RunSpec, root: Path, samples: list[data.Utterance] | None = None) -> data.TrainSet:
        d, feats = cfg.data, features_of(cfg)
        utts = self.samples(cfg, root, "train") if samples is None else list(samples)
        if d.get("max_duration_s"):
            utts = [u for u in utts if u.num_samples <= float(d["max_duration_s"]) * int(d["sample_rate"])]
        utts = data.trainable(utts, feats, lambda n: output_frames(n, cfg.model))
        return data.TrainSet(
            utts, int(cfg.batch_size), feats, drop_last=True, cache=bool(d.get("cache_features", False))
        )

    def eval_set(self, cfg: RunSpec, root: Path, samples: list[data.Utterance] | None = None) -> data.EvalSet:
        d = cfg.data
        utts = self.samples(cfg, root, "eval") if samples is None else list(samples)
        return data.EvalSet(
            utts,
            int(d.get("eval_batch_size", cfg.batch_size)),
            features_of(cfg),
            drop_last=False,
            cache=bool(d.get("cache_features", False)),
        )

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """Mean CTC loss of a micro-batch. Every length comes from the collate's host ints (the output
        lengths are computed from them on the host, model.py), so no device value is read back."""
        log_probs, out_lengths = model(batch["features"], batch["feature_lengths"], batch["host_feature_lengths"])
        target_lengths = torch.tensor(batch["host_target_lengths"], dtype=torch.long)
        return ctc_loss(log_probs, out_lengths, batch["targets"], target_lengths)

    def eval_stats(
        self, model: nn.Module, evalset: Any, cfg: RunSpec, device: torch.device, rank: int = 0, world: int = 1
    ) -> dict[str, Any]:
        """Word and character edits and reference lengths of greedy decoding, and the summed CTC loss over
        the utterances CTC can align (all of them in LibriSpeech's dev/test splits), over this rank's
        block of eval batches."""
        workers = int(cfg.num_workers)
        part = Subset(evalset, shard(len(evalset), rank, world))
        batches = (
            DataLoader(part, batch_size=None, num_workers=workers) if workers else (part[i] for i in range(len(part)))
        )
        counts, loss_sum, loss_n = ErrorCounts(), FloatSum(), 0
        for batch in batches:
            log_probs, out_lengths = model(
                batch["features"].to(device), batch["feature_lengths"].to(device), batch["host_feature_lengths"]
            )
            target_lengths = torch.tensor(batch["host_target_lengths"], dtype=torch.long)
            per_utt = ctc_loss(
                log_probs, out_lengths, batch["targets"].to(device), target_lengths, reduction="none"
            ).cpu()
            targets = batch["targets"].split(list(batch["host_target_lengths"]))
            for i, (text, hyp) in enumerate(zip(batch["texts"], greedy_decode(log_probs, out_lengths), strict=True)):
                counts.add(text, decode(hyp))
                if data.ctc_feasible(targets[i].tolist(), int(out_lengths[i])):
                    loss_sum.append(float(per_utt[i]))
                    loss_n += 1
        return {
            "word_errors": counts.word_errors,
            "words": counts.words,
            "char_errors": counts.char_errors,
            "chars": counts.chars,
            "loss_sum": loss_sum,
            "loss_n": loss_n,
        }

    def metrics_from(self, stats: dict[str, Any], cfg: RunSpec) -> dict[str, float]:
        """Corpus WER/CER (%), word accuracy = 100 - WER, and the mean CTC loss."""
        counts = ErrorCounts(stats["word_errors"], stats["words"], stats["char_errors"], stats["chars"])
        return {
            "word_acc": 100.0 - counts.wer,
            "wer": counts.wer,
            "cer": counts.cer,
            "loss": stats["loss_sum"] / max(int(stats["loss_n"]), 1),
        }

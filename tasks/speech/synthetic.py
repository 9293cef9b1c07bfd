"""Random training batches of speech's real shapes, for `adascale-bench perf --synthetic` (no LibriSpeech).

A batch is what `data.TrainSet.collate` returns for b utterances (the task's loss reads it): normalised
spectrogram features (b, F, T) zero-padded to the longest utterance, their frame counts, the
concatenated character targets and their lengths. F is the preset's (`features_of(cfg)`: 161 linear
bins at 16 kHz for the paper, 32 mel bins for tiny). The features are N(0, 1) noise, which is what
per-utterance normalisation makes of any spectrogram's scale.

Durations: a length-bucketed batch holds utterances of about the same length, so every utterance is the
nominal duration ± 5 %: LibriSpeech's mean (960 h over 281 241 training utterances: 12.3 s) for the
paper preset, the tone corpus's mean (0.6 s, tasks/speech/tiny.py) for tiny; `data.synthetic_duration_s`
overrides it. A fixed nominal length keeps every micro-batch's cost the same, so cells at different S
compare. Targets: characters drawn uniformly from the 28 non-blank labels, 15 a second (about
LibriSpeech's speaking rate; the tone corpus has 13.8), capped at half the model's output frames
(`model.output_frames`), so even with every label repeated the targets are CTC-feasible.
"""

from __future__ import annotations

from typing import Any

import torch

from bench.core.runspec import RunSpec

from . import features_of
from .model import output_frames
from .text import BLANK, NUM_CLASSES

LIBRISPEECH_MEAN_S = 12.3  # 960 h / 281 241 utterances (train-960)
TINY_MEAN_S = 0.6  # the tone corpus of tiny.py: 0.18-1.1 s, mean 0.61 s
SPREAD = 0.05  # ± around the nominal duration within a batch
CHARS_PER_S = 15.0


def duration_s(cfg: RunSpec) -> float:
    """The nominal utterance duration of a synthetic batch (see the module docstring)."""
    default = TINY_MEAN_S if cfg.preset == "tiny" else LIBRISPEECH_MEAN_S
    return float(cfg.data.get("synthetic_duration_s") or default)


def synthetic_batch(cfg: RunSpec, generator: torch.Generator, items: int | None = None) -> dict[str, Any]:
    """The collated batch of `items` TrainSet items (default 1, one micro-batch) of b utterances each."""
    feats = features_of(cfg)
    sample_rate = int(cfg.data["sample_rate"])
    n = int(cfg.batch_size) * (items or 1)
    seconds = duration_s(cfg) * (1 + SPREAD * (2 * torch.rand(n, generator=generator) - 1))
    frames = [feats.num_frames(int(s * sample_rate)) for s in seconds.tolist()]
    features = torch.randn(n, feats.num_features, max(frames), generator=generator)
    for i, t in enumerate(frames):
        features[i, :, t:] = 0.0  # padding: zero, the normalised mean, as the real collate pads
    labels = [
        max(1, min(round(CHARS_PER_S * s), output_frames(t, cfg.model) // 2))
        for s, t in zip(seconds.tolist(), frames, strict=True)
    ]
    targets = torch.randint(BLANK + 1, NUM_CLASSES, (sum(labels),), generator=generator)
    return {
        "features": features,
        "feature_lengths": torch.tensor(frames, dtype=torch.long),
        "targets": targets,
        "target_lengths": torch.tensor(labels, dtype=torch.long),
        "host_feature_lengths": tuple(frames),
        "host_target_lengths": tuple(labels),
    }

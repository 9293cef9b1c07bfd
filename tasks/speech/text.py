"""Characters, greedy CTC decoding and word/character error rates.

The vocabulary is DeepSpeech2's English character set for LibriSpeech: the CTC blank at index 0 (CTC
needs one class that emits nothing), then apostrophe, space and the 26 letters. LibriSpeech transcripts
are upper case and use exactly these characters, so no text normalisation beyond whitespace is needed.

WER is corpus-level, as in the DS2 and AdaScale papers: word edit distances summed over the corpus,
divided by the total number of reference words (not a mean of per-utterance rates, which would weight
short utterances more). The edit distance is torchaudio's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torchaudio.functional import edit_distance

BLANK = 0
LABELS: tuple[str, ...] = ("_", "'", " ", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ")  # "_" stands for the blank
NUM_CLASSES = len(LABELS)
_INDEX = {c: i for i, c in enumerate(LABELS) if i != BLANK}


def normalise(text: str) -> str:
    """Upper case, single spaces, no leading/trailing space: the form transcripts are compared in."""
    return " ".join(text.upper().split())


def encode(text: str) -> list[int]:
    """Label ids of a transcript; ValueError names the first character outside the vocabulary."""
    ids = []
    for ch in normalise(text):
        if ch not in _INDEX:
            raise ValueError(f"character {ch!r} is not in the vocabulary (apostrophe, space, A-Z)")
        ids.append(_INDEX[ch])
    return ids


def decode(ids: Iterable[int]) -> str:
    """Text of label ids (blanks dropped)."""
    return "".join(LABELS[i] for i in ids if i != BLANK)


def greedy_decode(log_probs: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """Best-path CTC decoding of (T, N, C) scores: argmax per frame over each utterance's valid frames,
    merge repeated labels, then drop blanks (in that order: "a _ a" is two a's, "a a" is one)."""
    best = log_probs.argmax(dim=-1).cpu()  # (T, N)
    out = []
    for n, length in enumerate(lengths.tolist()):
        path = torch.unique_consecutive(best[:length, n])
        out.append([int(i) for i in path if i != BLANK])
    return out


@dataclass
class ErrorCounts:
    """Edit distances and reference lengths accumulated over a corpus."""

    word_errors: int = 0
    words: int = 0
    char_errors: int = 0
    chars: int = 0

    def add(self, reference: str, hypothesis: str) -> None:
        ref, hyp = normalise(reference), normalise(hypothesis)
        self.word_errors += edit_distance(ref.split(), hyp.split())
        self.words += len(ref.split())
        self.char_errors += edit_distance(ref, hyp)
        self.chars += len(ref)

    @property
    def wer(self) -> float:
        """Word error rate in percent (can exceed 100 with many insertions)."""
        return 100.0 * self.word_errors / max(self.words, 1)

    @property
    def cer(self) -> float:
        """Character error rate in percent (spaces count as characters)."""
        return 100.0 * self.char_errors / max(self.chars, 1)


def corpus_wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus-level WER in percent: total word edits / total reference words."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    counts = ErrorCounts()
    for ref, hyp in zip(references, hypotheses, strict=True):
        counts.add(ref, hyp)
    return counts.wer

"""A tiny LibriSpeech-format corpus of synthetic "speech" that a small DS2 can learn to transcribe.

Every character is a two-tone chord, like a telephone keypad's DTMF digits: one tone from a low group
of six frequencies and one from a high group of five, so the 27 symbols (A-Z and apostrophe) are
27 distinct chords far apart in frequency. A word is its characters' chords one after another with
short gaps (so a doubled letter is two chords), a space is a longer silence. Speakers differ in
pitch (+-2 %), speaking rate and loudness; every chord's length and level jitter a little and there is
background noise. The transcription is learnable from the audio alone (what CTC must discover is
which chord is which letter), and dev speakers are not training speakers, as in LibriSpeech.

The corpus is written as real 16-bit FLAC (soundfile) in LibriSpeech's folder layout, with its
`<speaker>-<chapter>.trans.txt` transcripts, so the real loader reads it. Deterministic
(numpy.random.default_rng(0)).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile as sf

from bench.core import safefs

SAMPLE_RATE = 8000
LOW_HZ = (420.0, 600.0, 780.0, 960.0, 1140.0, 1320.0)
HIGH_HZ = (1750.0, 2150.0, 2550.0, 2950.0, 3350.0)
SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ'"
WORDS = tuple(
    "THE QUICK BROWN FOX JUMPS OVER LAZY DOG YES NO STOP GO LEFT RIGHT IT'S DON'T WAX BEAM ZIP KIND SEE ALL".split()
)
# (split, speaker, chapters, utterances per chapter): 4 x 2 x 20 = 160 training, 2 x 16 = 32 dev.
LAYOUT = (
    ("train-clean-100", 19, (198, 227), 20),
    ("train-clean-100", 26, (495, 496), 20),
    ("train-clean-100", 32, (4137, 21625), 20),
    ("train-clean-100", 40, (222, 3983), 20),
    ("dev-clean", 84, (121123,), 16),
    ("dev-clean", 174, (50561,), 16),
)


def chord(symbol: str) -> tuple[float, float]:
    """The (low, high) tone pair of a character."""
    k = SYMBOLS.index(symbol)
    return LOW_HZ[k % len(LOW_HZ)], HIGH_HZ[k // len(LOW_HZ)]


def render(text: str, rng: np.random.Generator, pitch: float, char_s: float, level: float) -> np.ndarray:
    """Audio of a transcript: chords for characters, silence for spaces, raised-cosine edges."""
    pieces = [np.zeros(int(rng.uniform(0.03, 0.06) * SAMPLE_RATE), dtype=np.float32)]
    for word_i, word in enumerate(text.split(" ")):
        if word_i:
            pieces.append(np.zeros(int(rng.uniform(0.08, 0.12) * SAMPLE_RATE), dtype=np.float32))
        for ch_i, ch in enumerate(word):
            if ch_i:
                pieces.append(np.zeros(int(rng.uniform(0.01, 0.02) * SAMPLE_RATE), dtype=np.float32))
            n = int(char_s * rng.uniform(0.8, 1.2) * SAMPLE_RATE)
            t = np.arange(n) / SAMPLE_RATE
            low, high = chord(ch)
            tone = np.sin(2 * np.pi * low * pitch * t + rng.uniform(0, 2 * np.pi))
            tone += 0.8 * np.sin(2 * np.pi * high * pitch * t + rng.uniform(0, 2 * np.pi))
            ramp = min(n // 4, int(0.005 * SAMPLE_RATE))
            env = np.ones(n)
            env[:ramp] = 0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)
            env[n - ramp :] = env[:ramp][::-1]
            pieces.append((tone * env * rng.uniform(0.7, 1.0)).astype(np.float32))
    pieces.append(np.zeros(int(rng.uniform(0.03, 0.06) * SAMPLE_RATE), dtype=np.float32))
    audio = np.concatenate(pieces) * level
    audio += rng.normal(0.0, 0.01, audio.shape).astype(np.float32)
    return np.clip(audio, -1.0, 1.0)


def write_tiny(root: Path) -> None:
    """Write <root>/train-clean-100 and <root>/dev-clean in LibriSpeech's layout."""
    root = Path(root)
    rng = np.random.default_rng(0)
    for split, speaker, chapters, count in LAYOUT:
        pitch, char_s, level = rng.uniform(0.98, 1.02), rng.uniform(0.035, 0.05), rng.uniform(0.25, 0.45)
        for chapter in chapters:
            folder = root / split / str(speaker) / str(chapter)
            safefs.mkdirs(folder)
            lines = []
            for utt in range(count):
                uid = f"{speaker}-{chapter}-{utt:04d}"
                text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
                flac = io.BytesIO()
                sf.write(flac, render(text, rng, pitch, char_s, level), SAMPLE_RATE, subtype="PCM_16", format="FLAC")
                safefs.write_bytes(folder / f"{uid}.flac", flac.getbuffer())  # no link followed (bench.core.safefs)
                lines.append(f"{uid} {text}\n")
            safefs.write_text(folder / f"{speaker}-{chapter}.trans.txt", "".join(lines))

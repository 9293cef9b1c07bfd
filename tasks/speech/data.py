"""LibriSpeech on disk: discovery, audio features and length-bucketed batches.

Layout (as the openslr tarballs extract, with or without their top `LibriSpeech/` folder):

    <root>/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
    <root>/<split>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt   lines "<utt-id> UPPER CASE TEXT"

Split names are LibriSpeech's (train-clean-100, dev-clean, ...); "train-960" means the three training
splits together and "a+b" any union. Audio is read with soundfile: torchaudio 2.11's `load` needs
torchcodec (and a system FFmpeg), which this suite does not depend on.

Manifest (optional, written by `adascale-bench prepare speech`): `<root>/<split>.manifest.tsv`, a
tab-separated file with the header line `uid path num_samples sample_rate text` and one row per
utterance, in the order the folder scan gives (transcript files sorted, then their lines); `path` is the
flac's path relative to <root> with "/" separators. When a split has one, `read_split` builds its
utterances from it instead of opening every flac header (281k files for the 960 h); without one, the
split folder is scanned as before. Both give the same list.

Features: log(1 + |STFT|) over 20 ms Hamming windows every 10 ms (161 bins at 16 kHz), the linear
spectrogram of DS2 and deepspeech.pytorch, or a log mel spectrogram ("mel"), both from
torchaudio.transforms; each utterance is then normalised by its own mean and standard deviation
(per-utterance normalisation, as deepspeech.pytorch does: no corpus statistics to compute or ship).

Batching: utterances are sorted by length once, at construction, and cut into consecutive batches of b,
so a batch pads little; each training item is a whole batch (items_per_microbatch = 1) and the engine
shuffles batches, not utterances. The last incomplete batch (the b - 1 longest utterances at most) is
dropped so every micro-batch has b utterances. Utterances CTC cannot align (more labels, counting the
blank needed between repeats, than output frames) are dropped from training, so an infinite CTC loss
during training always means a real blow-up, never a data artefact. There is no augmentation (DS2's
noise augmentation needs a noise corpus LibriSpeech does not have), so the items' keys are unused.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf
import torch
import torchaudio

from bench.core import safefs
from bench.core.errors import UserError

from .text import encode

LAYOUT = "<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac with <speaker>-<chapter>.trans.txt"
TRAIN_960 = ("train-clean-100", "train-clean-360", "train-other-500")
_TRANS = re.compile(r"(\d+)-(\d+)\.trans\.txt")
_UTT = re.compile(r"(\d+)-(\d+)-(\d+)")
MANIFEST = "{split}.manifest.tsv"
MANIFEST_COLUMNS = ("uid", "path", "num_samples", "sample_rate", "text")
# Characters of one transcript line: LibriSpeech's longest (a 35 s utterance) has about 600, and the manifest's
# csv reader refuses a field past 128 Ki characters; a longer line is damage, refused before it is read whole.
MAX_TRANSCRIPT_LINE = 1 << 16


def split_names(name: str) -> list[str]:
    """LibriSpeech split folders named by a preset's split name."""
    names: list[str] = []
    for part in name.split("+"):
        names.extend(TRAIN_960 if part == "train-960" else (part,))
    return names


def split_dir(root: Path, split: str) -> Path:
    """<root>/<split>, or <root>/LibriSpeech/<split> as the tarballs extract."""
    for candidate in (root / split, root / "LibriSpeech" / split):
        if candidate.is_dir():
            return candidate
    raise UserError(f"{root / split}: LibriSpeech split folder not found; expected {root}/{LAYOUT}")


def transcript_files(folder: Path) -> list[Path]:
    """The <speaker>/<chapter>/<speaker>-<chapter>.trans.txt files of a split, in a fixed order."""
    found = []
    for path in sorted(folder.glob("*/*/*.trans.txt")):
        m = _TRANS.fullmatch(path.name)
        if not m or (m[1], m[2]) != (path.parent.parent.name, path.parent.name):
            raise UserError(
                f"{path}: transcript must be named <speaker>-<chapter>.trans.txt inside "
                f"<speaker>/<chapter>/; expected {folder.parent}/{LAYOUT}"
            )
        found.append(path)
    if not found:
        raise UserError(
            f"{folder}: no <speaker>/<chapter>/<speaker>-<chapter>.trans.txt found; expected {folder.parent}/{LAYOUT}"
        )
    return found


@dataclass(frozen=True)
class Utterance:
    uid: str
    path: Path
    text: str
    num_samples: int


def parse_transcripts(trans: Path, name: str | None = None) -> list[tuple[str, str]]:
    """(utterance id, text) pairs of one chapter's transcript, checked against the file's chapter.
    Errors name the file as `name` when given (e.g. the tarball member it came from)."""
    speaker, chapter = trans.parent.parent.name, trans.parent.name
    name = name or str(trans)
    pairs = []
    try:
        with open(trans, encoding="utf-8") as f:  # a prepared folder's may be link_or_copy's link: followed
            for lineno, line in enumerate(safefs.bounded_lines(f, name, MAX_TRANSCRIPT_LINE), 1):
                if line.strip():
                    pairs.append(_utterance(line, name, lineno, speaker, chapter))
    except UnicodeDecodeError as e:
        raise UserError(f"{name}: not UTF-8 text (byte {e.start}); expected a LibriSpeech transcript") from None
    return pairs


def _utterance(line: str, name: str, lineno: int, speaker: str, chapter: str) -> tuple[str, str]:
    """(utterance id, text) of one transcript line, its id of this chapter and its text encodable."""
    uid, _, text = line.strip().partition(" ")
    m = _UTT.fullmatch(uid)
    if not m or (m[1], m[2]) != (speaker, chapter):
        raise UserError(f"{name}:{lineno}: expected '<{speaker}>-<{chapter}>-<utt> TRANSCRIPT', got {line[:60]!r}")
    try:
        encode(text)
    except ValueError as e:
        raise UserError(f"{name}:{lineno}: {e}") from None
    return uid, text.strip()


def write_manifest(path: Path, root: Path, utts: Sequence[Utterance], sample_rate: int) -> None:
    """Write a split's manifest (format in the module docstring) atomically, through bench.core.safefs."""
    with safefs.writer(path, text=True) as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(MANIFEST_COLUMNS)
        for u in utts:
            w.writerow((u.uid, Path(u.path).relative_to(root).as_posix(), u.num_samples, sample_rate, u.text))


def read_manifest(root: Path, manifest: Path, sample_rate: int) -> list[Utterance]:
    """The utterances a manifest lists (paths under `root`); a malformed row is a UserError naming its line."""
    utts = []
    with open(manifest, encoding="utf-8", newline="") as f:
        rows = csv.reader(safefs.bounded_lines(f, manifest), delimiter="\t")
        header = next(rows, None)
        if tuple(header or ()) != MANIFEST_COLUMNS:
            raise UserError(f"{manifest}:1: expected the header {' '.join(MANIFEST_COLUMNS)} (tab-separated)")
        for lineno, row in enumerate(_rows(rows, manifest), 2):
            try:
                uid, rel, frames, rate, text = row
                num_samples, rate_hz = int(frames), int(rate)
            except ValueError:
                raise UserError(
                    f"{manifest}:{lineno}: expected {len(MANIFEST_COLUMNS)} tab-separated fields "
                    f"{' '.join(MANIFEST_COLUMNS)}, got {row!r:.80}"
                ) from None
            path = root.joinpath(*rel.split("/"))
            if rate_hz != sample_rate:
                raise UserError(
                    f"{path}: sample rate {rate_hz} Hz ({manifest.name}), the preset expects "
                    f"{sample_rate} Hz (data.sample_rate)"
                )
            utts.append(Utterance(uid, path, text, num_samples))
    if not utts:
        raise UserError(f"{manifest}: lists no utterance; expected one row per utterance after the header")
    return utts


def _rows(rows: Iterator[list[str]], manifest: Path) -> Iterator[list[str]]:
    """`rows` with csv's own refusal (a field past its 128 Ki character limit) as one line naming the file."""
    try:
        yield from rows
    except csv.Error as e:
        raise UserError(f"{manifest}: not a manifest (line {getattr(rows, 'line_num', '?')}: {e})") from None


def read_split(root: Path, name: str, sample_rate: int) -> list[Utterance]:
    """Every utterance of the named split(s): from the split's manifest when it has one, else with its
    length read from each flac header."""
    utts = []
    for split in split_names(name):
        manifest = root / MANIFEST.format(split=split)
        if manifest.is_file():
            utts.extend(read_manifest(root, manifest, sample_rate))
            continue
        folder = split_dir(root, split)
        for trans in transcript_files(folder):
            for uid, text in parse_transcripts(trans):
                path = trans.parent / f"{uid}.flac"
                if not path.is_file():
                    raise UserError(
                        f"{path}: audio missing for the transcript line in {trans.name}; "
                        f"expected {folder.parent}/{LAYOUT}"
                    )
                try:
                    info = sf.info(str(path))
                except (RuntimeError, sf.LibsndfileError) as e:
                    raise UserError(f"{path}: not readable audio ({e})") from None
                if info.samplerate != sample_rate:
                    raise UserError(
                        f"{path}: sample rate {info.samplerate} Hz, the preset expects "
                        f"{sample_rate} Hz (data.sample_rate)"
                    )
                utts.append(Utterance(uid, path, text, int(info.frames)))
    return utts


def check_layout(root: Path, names: Sequence[str]) -> None:
    """Cheap layout check (no audio decoding): split folders, transcripts, and the first chapter's audio."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root}: data folder not found; expected {root}/{LAYOUT}")
    for name in names:
        for split in split_names(name):
            folder = split_dir(root, split)
            first = transcript_files(folder)[0]
            for uid, _ in parse_transcripts(first)[:1]:
                path = first.parent / f"{uid}.flac"
                if not path.is_file():
                    raise UserError(
                        f"{path}: audio missing for the transcript line in {first.name}; expected {root}/{LAYOUT}"
                    )


class Features:
    """Waveform -> normalised log spectrogram (F, T) with torchaudio.transforms."""

    def __init__(
        self,
        sample_rate: int,
        kind: str = "linear",
        window_s: float = 0.02,
        hop_s: float = 0.01,
        n_mels: int | None = None,
    ) -> None:
        win = round(sample_rate * window_s)
        self.hop = round(sample_rate * hop_s)
        if kind == "linear":
            self.transform: torch.nn.Module = torchaudio.transforms.Spectrogram(
                n_fft=win, win_length=win, hop_length=self.hop, window_fn=torch.hamming_window, power=1.0
            )
            self.num_features = win // 2 + 1
        elif kind == "mel":
            if not n_mels:
                raise ValueError("mel features need data.n_mels")
            self.transform = torchaudio.transforms.MelSpectrogram(
                sample_rate=sample_rate,
                n_fft=win,
                win_length=win,
                hop_length=self.hop,
                window_fn=torch.hamming_window,
                power=1.0,
                n_mels=int(n_mels),
            )
            self.num_features = int(n_mels)
        else:
            raise ValueError(f"data.features must be 'linear' or 'mel', got {kind!r}")

    def num_frames(self, num_samples: int) -> int:
        return num_samples // self.hop + 1  # centred frames, torchaudio's default

    def __call__(self, waveform: torch.Tensor) -> torch.Tensor:
        spec = torch.log1p(self.transform(waveform))
        return (spec - spec.mean()) / (spec.std() + 1e-5)


def load_audio(path: Path) -> torch.Tensor:
    """Mono float32 waveform in [-1, 1]."""
    try:
        audio, _ = sf.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, sf.LibsndfileError) as e:
        raise UserError(f"{path}: not readable audio ({e})") from None
    return torch.from_numpy(audio.mean(axis=1))


def ctc_feasible(targets: Sequence[int], output_frames: int) -> bool:
    """CTC needs one frame per label plus one blank between equal neighbours."""
    repeats = sum(a == b for a, b in zip(targets, targets[1:], strict=False))
    return len(targets) + repeats <= output_frames


class Batches:
    """Length-sorted utterances cut into batches; optionally with every feature computed up front."""

    def __init__(
        self, utts: Sequence[Utterance], batch_size: int, features: Features, drop_last: bool, cache: bool
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        ordered = sorted(utts, key=lambda u: (u.num_samples, u.uid))
        stop = len(ordered) - len(ordered) % batch_size if drop_last else len(ordered)
        self.batches = [list(ordered[i : i + batch_size]) for i in range(0, stop, batch_size)]
        self.features = features
        self.targets = {u.uid: torch.tensor(encode(u.text), dtype=torch.long) for b in self.batches for u in b}
        self._cache: dict[str, torch.Tensor] | None = None
        if cache:
            self._cache = {u.uid: self._compute(u) for b in self.batches for u in b}

    def _compute(self, utt: Utterance) -> torch.Tensor:
        return self.features(load_audio(utt.path))

    def __len__(self) -> int:
        return len(self.batches)

    def load(self, index: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(features (F, T), label ids) of every utterance of batch `index`."""
        out = []
        for u in self.batches[index]:
            feats = self._cache[u.uid] if self._cache is not None else self._compute(u)
            out.append((feats, self.targets[u.uid]))
        return out

    def collate(self, samples: Sequence[list[tuple[torch.Tensor, torch.Tensor]]]) -> dict[str, torch.Tensor]:
        """Items (lists of utterances) -> zero-padded features (N, F, T) (zero is the normalised mean),
        their lengths, concatenated targets and target lengths; the two lengths also as tuples of host
        ints (`host_feature_lengths`, `host_target_lengths`), which stay on the host when the engine moves
        the batch's tensors to the device, so the training step never reads a length back from it."""
        utts = [u for item in samples for u in item]
        feats = [f for f, _ in utts]
        num_f, t_max = feats[0].shape[0], max(f.shape[1] for f in feats)
        padded = feats[0].new_zeros(len(feats), num_f, t_max)
        for i, f in enumerate(feats):
            padded[i, :, : f.shape[1]] = f
        frames = tuple(int(f.shape[1]) for f in feats)
        labels = tuple(len(t) for _, t in utts)
        return {
            "features": padded,
            "feature_lengths": torch.tensor(frames, dtype=torch.long),
            "targets": torch.cat([t for _, t in utts]),
            "target_lengths": torch.tensor(labels, dtype=torch.long),
            "host_feature_lengths": frames,
            "host_target_lengths": labels,
        }


class TrainSet(Batches):
    """Training items: item (index, key) is batch `index`, the same whatever the key (no augmentation)."""

    def __getitem__(self, item: tuple[int, int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        index, _key = item
        return self.load(index)


class EvalSet(Batches):
    """Evaluation batches in a fixed order; item i is batch i, already collated (for a DataLoader)."""

    def __getitem__(self, index: int) -> dict[str, Any]:
        batch = self.collate([self.load(index)])
        batch["texts"] = [u.text for u in self.batches[index]]
        return batch


def trainable(utts: Sequence[Utterance], features: Features, output_frames: Callable[[int], int]) -> list[Utterance]:
    """The utterances CTC can align at the model's output frame rate."""
    return [u for u in utts if ctc_feasible(encode(u.text), output_frames(features.num_frames(u.num_samples)))]

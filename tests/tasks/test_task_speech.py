"""speech task: the tiny LibriSpeech corpus through the real loader, CTC decoding, WER, loss behaviour."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import soundfile as sf
import torch

from bench.core.errors import UserError
from bench.core.runspec import RunSpec
from tasks.base import Task
from tasks.speech import Speech, ctc_loss
from tasks.speech import data as sdata
from tasks.speech.text import (
    BLANK,
    LABELS,
    NUM_CLASSES,
    ErrorCounts,
    corpus_wer,
    decode,
    encode,
    greedy_decode,
)
from tests.helpers import tiny_spec


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("speech_tiny")
    Speech().write_tiny(root)
    return root


@pytest.fixture(scope="module")
def train_set(tiny_root: Path) -> sdata.TrainSet:
    return Speech().train_set(tiny_spec("speech"), tiny_root)


@pytest.fixture
def cfg() -> RunSpec:
    return tiny_spec("speech")


def test_presets_complete_and_protocol() -> None:
    task = Speech()
    assert isinstance(task, Task) and task.metric == "word_acc" and task.higher_is_better
    for name in ("paper", "tiny"):
        preset = Speech.presets[name]
        assert task.items_per_microbatch(preset) == 1
    paper = Speech.presets["paper"]
    assert (paper["T1"], paper["batch_size"], paper["momentum"]) == (84800, 32, 0.9)
    assert paper["scales"] == [1, 4, 8, 16, 32] and paper["lr_schedule"]["kind"] == "exponential"


def test_vocabulary() -> None:
    assert NUM_CLASSES == 29 and LABELS[BLANK] == "_" and LABELS[1] == "'" and LABELS[2] == " "
    assert decode(encode("IT'S A  dog")) == "IT'S A DOG"
    with pytest.raises(ValueError, match="vocabulary"):
        encode("NO DIGITS 7")


def test_tiny_corpus_read_by_loader_and_round_trips(tiny_root: Path, cfg: dict, train_set: sdata.TrainSet) -> None:
    task = Speech()
    task.check_data(tiny_root, cfg)
    train = sdata.read_split(tiny_root, "train-clean-100", 8000)
    dev = sdata.read_split(tiny_root, "dev-clean", 8000)
    assert len(train) == 160 and len(dev) == 32
    assert not {u.uid.split("-")[0] for u in train} & {u.uid.split("-")[0] for u in dev}  # unseen speakers
    # Text round trip: the transcript file line, the utterance, its ids.
    first = train[0]
    trans = first.path.parent / f"{'-'.join(first.uid.split('-')[:2])}.trans.txt"
    assert f"{first.uid} {first.text}" in trans.read_text().splitlines()
    for u in train + dev:
        assert decode(encode(u.text)) == u.text
        assert u.path.name == f"{u.uid}.flac"
    audio, rate = sf.read(str(first.path), dtype="float32")
    assert rate == 8000 and len(audio) == first.num_samples and sf.info(str(first.path)).format == "FLAC"

    ts = train_set
    assert len(ts) == 160 // cfg.batch_size
    lengths = [[u.num_samples for u in b] for b in ts.batches]
    flat = [n for b in lengths for n in b]
    assert flat == sorted(flat) and all(len(b) == cfg.batch_size for b in lengths)  # length-bucketed
    batch = ts.collate([ts[(3, 11)]])
    texts = [u.text for u in ts.batches[3]]
    assert batch["features"].shape[:2] == (8, cfg.data["n_mels"])
    assert batch["features"].shape[2] == int(batch["feature_lengths"].max())
    ids = batch["targets"].split(batch["target_lengths"].tolist())
    assert [decode(t.tolist()) for t in ids] == texts  # id round trip through collate
    # Items do not depend on the augmentation key (there is none) nor on call order.
    again = ts.collate([ts[(3, 999)]])
    assert torch.equal(again["features"], batch["features"])
    assert torch.equal(again["targets"], batch["targets"])


def test_wer_hand_computed() -> None:
    ref = "THE CAT SAT"
    assert corpus_wer([ref], ["THE CAT SAT DOWN"]) == pytest.approx(100 / 3)  # one insertion
    assert corpus_wer([ref], ["THE SAT"]) == pytest.approx(100 / 3)  # one deletion
    assert corpus_wer([ref], ["THE BAT SAT"]) == pytest.approx(100 / 3)  # one substitution
    assert corpus_wer([ref], [""]) == pytest.approx(100.0)
    assert corpus_wer([ref], ["A CAT SAT ON A MAT"]) == pytest.approx(400 / 3)  # 1 sub + 3 ins
    # Corpus level: (1 + 2) errors / (4 + 2) words = 50 %, not the mean of 25 % and 100 %.
    assert corpus_wer(["A B C D", "E F"], ["A B C", "E G H"]) == pytest.approx(50.0)
    counts = ErrorCounts()
    counts.add("AB CD", "AB CE")
    assert (counts.word_errors, counts.words, counts.char_errors, counts.chars) == (1, 2, 1, 5)


def _scores(paths: list[list[int]]) -> torch.Tensor:
    """(T, N, C) log-probs whose per-frame argmax is the given paths (padded with blanks)."""
    t_max = max(len(p) for p in paths)
    scores = torch.full((t_max, len(paths), NUM_CLASSES), -5.0)
    for n, path in enumerate(paths):
        for t in range(t_max):
            scores[t, n, path[t] if t < len(path) else BLANK] = 0.0
    return scores.log_softmax(-1)


def test_greedy_decoding_collapses_repeats_then_drops_blanks() -> None:
    a, b, sp = encode("A")[0], encode("B")[0], LABELS.index(" ")
    paths = [[BLANK, a, a, BLANK, a, b, b, sp, BLANK, b], [b, b, b, a, a, a, a, a, a, a]]
    lengths = torch.tensor([10, 3])  # the second utterance ends after 3 frames: its a's are padding
    hyps = greedy_decode(_scores(paths), lengths)
    assert hyps == [[a, a, b, sp, b], [b]]
    assert decode(hyps[0]) == "AAB B"
    assert greedy_decode(_scores([[BLANK] * 4]), torch.tensor([4])) == [[]]


def test_nonfinite_loss_is_not_hidden(cfg: dict, train_set: sdata.TrainSet) -> None:
    task, ts = Speech(), train_set
    torch.manual_seed(0)
    model = task.build_model(cfg)
    batch = ts.collate([ts[(0, 0)]])
    assert math.isfinite(task.loss(model, batch).item())
    batch["features"][0, :, 2] = float("nan")
    assert not math.isfinite(task.loss(model, batch).item())
    # An alignment CTC cannot make is infinite, not silently zero (zero_infinity is off).
    log_probs = torch.zeros(2, 1, NUM_CLASSES).log_softmax(-1)
    loss = ctc_loss(log_probs, torch.tensor([2]), torch.tensor([3, 3, 3]), torch.tensor([3]))
    assert math.isinf(float(loss))


def test_ctc_infeasible_utterances_dropped_from_training() -> None:
    assert sdata.ctc_feasible([3, 4, 5], 3) and not sdata.ctc_feasible([3, 3, 5], 3)
    assert sdata.ctc_feasible([3, 3, 5], 4)


def test_bad_layouts_raise_user_error_naming_path(tiny_root: Path, tmp_path: Path, cfg: dict) -> None:
    task = Speech()
    with pytest.raises(UserError, match=str(tmp_path / "missing")):
        task.check_data(tmp_path / "missing", cfg)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="train-clean-100"):
        task.check_data(empty, cfg)
    root = tmp_path / "copy"
    shutil.copytree(tiny_root, root)
    chapter = root / "train-clean-100" / "19" / "198"
    (chapter / "19-198-0000.flac").unlink()
    with pytest.raises(UserError, match="19-198-0000.flac"):
        task.check_data(root, cfg)
    (chapter / "19-198.trans.txt").rename(chapter / "transcript.trans.txt")
    with pytest.raises(UserError, match="transcript.trans.txt"):
        task.check_data(root, cfg)
    dev_trans = root / "dev-clean" / "84" / "121123" / "84-121123.trans.txt"
    dev_trans.write_text(dev_trans.read_text().replace("84-121123-0005", "84-999-0005"))
    with pytest.raises(UserError, match="84-121123.trans.txt:6"):
        task.eval_set(cfg, root)
    with pytest.raises(UserError, match="16000 Hz"):
        task.train_set(tiny_spec("speech", data={"sample_rate": 16000}), tiny_root)


def test_librispeech_top_folder_accepted(tiny_root: Path, tmp_path: Path, cfg: dict) -> None:
    shutil.copytree(tiny_root / "dev-clean", tmp_path / "LibriSpeech" / "dev-clean")
    assert len(sdata.read_split(tmp_path, "dev-clean", 8000)) == 32
    assert sdata.split_names("train-960") == ["train-clean-100", "train-clean-360", "train-other-500"]


def test_eval_output_independent_of_batch_padding(tiny_root: Path, cfg: dict) -> None:
    task = Speech()
    torch.manual_seed(0)
    model = task.build_model(cfg).eval()
    ev = task.eval_set(cfg, tiny_root)
    batch = ev[1]
    with torch.no_grad():
        together, out_len = model(batch["features"], batch["feature_lengths"])
        i = int(batch["feature_lengths"].argmin())
        n = int(batch["feature_lengths"][i])
        alone, alone_len = model(batch["features"][i : i + 1, :, :n], batch["feature_lengths"][i : i + 1])
    assert int(alone_len) == int(out_len[i]) and int(out_len[i]) < together.shape[0]
    torch.testing.assert_close(alone[:, 0], together[: int(out_len[i]), i], atol=1e-5, rtol=1e-4)
    with torch.no_grad():
        metrics = task.evaluate(model, ev, cfg, torch.device("cpu"))
    assert {"word_acc", "wer", "cer", "loss"} <= set(metrics)
    assert metrics["word_acc"] == pytest.approx(100 - metrics["wer"]) and math.isfinite(metrics["loss"])


def test_plain_sgd_steps_lower_ctc_loss(cfg: dict, train_set: sdata.TrainSet) -> None:
    """Test-only SGD loop (the suite's engine owns the real one): the model can fit a batch."""
    task = Speech()
    torch.manual_seed(0)
    model = task.build_model(cfg).train()
    batch = train_set.collate([train_set[(5, 0)]])
    opt = torch.optim.SGD(model.parameters(), lr=0.004, momentum=0.9)
    losses = []
    for _ in range(8):
        loss = task.loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.6 * losses[0], losses

"""Host synchronisations per training iteration (bench.experiments.syncs): at most one outside evaluation,
for every paper preset's model at its real per-example shapes; and a loss that reads a value on the host
is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.experiments.syncs import HOST_RESIDENT, count_host_syncs, engine_syncs
from bench.run.spec import resolve
from tasks import get_task
from tasks.synthetic import SyntheticData


def paper_spec(task: Any, tmp: Path, scale: int, batch_size: int | None) -> dict[str, Any]:
    over: dict[str, Any] = {"num_workers": 0}
    if batch_size is not None:
        over["batch_size"] = batch_size
    return resolve(task, "adascale", scale, 0, "paper", str(tmp / "data"), over)


def test_counter_sees_item_tolist_and_bool() -> None:
    t = torch.ones(3)
    per, counts = count_host_syncs(lambda: (t.sum().item(), t.tolist(), bool(t[0] > 0), float(t[1])), repeat=2)
    assert per == 4 and counts == {"aten::_local_scalar_dense": 6, "Tensor.tolist": 2}
    assert count_host_syncs(lambda: t * 2)[0] == 0


def test_counter_sees_data_dependent_sizes() -> None:
    """Boolean-mask indexing and unique wait on a GPU for the count of what they return; a mask used by
    multiplication does not."""
    t, mask = torch.arange(6.0), torch.tensor([True, False] * 3)
    per, counts = count_host_syncs(lambda: (t[mask], t.unique(return_counts=True)))
    assert per == 2 and counts == {"aten::nonzero": 1, "aten::_unique2": 1}, counts
    assert count_host_syncs(lambda: (t * mask).sum())[0] == 0


class ReadsTheLoss(SyntheticData):
    """A task whose loss reads its value on the host every micro-batch (what must not happen)."""

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        loss = self._task.loss(model, batch)
        if float(loss) < 0:
            raise AssertionError
        return loss


def test_paper_cifar10_syncs_once_per_iteration_and_a_host_read_is_caught(tmp_path: Path) -> None:
    """The paper preset's ResNet-18 v2 on 32×32 images at S = 2 (micro-batch 2 instead of 128, to keep the
    test to seconds: the sync count does not depend on it): the engine's one transfer per iteration; a loss
    that reads its value adds one per micro-batch."""
    task = SyntheticData(get_task("cifar10"))
    spec = paper_spec(task, tmp_path, 2, 2)
    per, counts = engine_syncs(task, spec, tmp_path / "a")
    assert per == 1, counts
    bad = ReadsTheLoss(get_task("cifar10"))
    per, counts = engine_syncs(bad, paper_spec(bad, tmp_path, 2, 2), tmp_path / "b")
    assert per == 3, counts  # 1 + S


# The five paper presets' models at their real per-example shapes, at S = 2 (W = 1, A = 2). Micro-batch
# reduced where the preset's takes minutes on 2 CPU cores (the count does not depend on it): imagenet 256 -> 2
# images of 224×224, speech 32 -> 1 utterance of 12.3 s, transformer 2048 -> 512 tokens of 25-30-token
# sentences, yolo 16 -> 1 image of 416×416; cifar10 at its 128. Minutes: run in CI's cluster stage.
# Every task meets the bar. yolo met it when its loss became tasks/yolo/loss.py (13 per iteration at S = 2 on
# the tiny preset and 15 on the paper's before: ultralytics' v8DetectionLoss read the target counts on the
# host with unique and counts.max(), indexed by boolean masks with nonzero, and filled its anchor strides
# from device scalars, per micro-batch); speech when its lengths stayed on the host (9 before: the model's
# out_lengths.cpu() and pad_packed_sequence's unsorted_indices.cpu(), per micro-batch).
PAPER = [("cifar10", None), ("imagenet", 2), ("transformer", 512), ("yolo", 1)]
# speech's paper model (5 × 1024 bidirectional LSTMs) on one 12.3 s utterance takes over 7 minutes for the
# two counted iterations on 2 cores: its sync count (which does not depend on the sizes) is held on the tiny
# preset's model, the same code (tasks/speech/model.py, the CTC loss), in test_speech_syncs below. yolo's
# paper count runs with the cluster stage; test_yolo_syncs holds it on every run, on the tiny preset's
# model (the same loss, tasks/yolo/loss.py, on a two-scale head).


@pytest.mark.paper
@pytest.mark.parametrize(("name", "batch"), PAPER, ids=["cifar10", "imagenet", "transformer", "yolo"])
def test_every_paper_preset_syncs_at_most_once_per_iteration(name: str, batch: int | None, tmp_path: Path) -> None:
    task = SyntheticData(get_task(name))
    per, counts = engine_syncs(task, paper_spec(task, tmp_path, 2, batch), tmp_path, iterations=1)
    assert per <= 1, f"{name}: {per} host syncs per iteration: {counts}"


def test_speech_syncs(tmp_path: Path) -> None:
    """The engine's one transfer, nothing else: the lengths come from the collate's host ints (the model
    computes its output lengths from them on the host), so neither pack_padded_sequence, the unpadding nor
    the CTC loss reads a device value. (Was 9 at S = 2: per micro-batch out_lengths.cpu() and
    pad_packed_sequence's unsorted_indices.cpu().) The GRU's reads of its PackedSequence's batch_sizes,
    a host tensor, are reported apart, 2 per layer and micro-batch."""
    task = SyntheticData(get_task("speech"))
    spec = resolve(task, "adascale", 2, 0, "tiny", str(tmp_path / "data"), {"num_workers": 0})
    per, counts = engine_syncs(task, spec, tmp_path, iterations=1)
    assert per == 1, f"speech: {per} host syncs per iteration: {counts}"
    assert counts == {"Tensor.tolist": 1, HOST_RESIDENT: 4}, counts


def test_yolo_syncs(tmp_path: Path) -> None:
    """The tiny preset at S = 2: the engine's one transfer (ultralytics' own loss made it 13)."""
    task = SyntheticData(get_task("yolo"))
    spec = resolve(task, "adascale", 2, 0, "tiny", str(tmp_path / "data"), {"num_workers": 0})
    per, counts = engine_syncs(task, spec, tmp_path, iterations=1)
    assert per <= 1, f"yolo: {per} host syncs per iteration: {counts}"


def test_host_resident_reads_set_apart_only_inside_packed_recurrent_modules() -> None:
    """An LSTM on a PackedSequence reads its batch_sizes (a host tensor by torch's contract): reported,
    not counted; the same read outside the module, and an item() of the output, are counted."""
    from torch.nn.utils.rnn import pack_padded_sequence

    lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    seq = pack_padded_sequence(torch.randn(5, 2, 3), [5, 3])
    per, counts = count_host_syncs(lambda: lstm(seq))
    assert per == 0 and counts[HOST_RESIDENT] > 0, counts
    per, counts = count_host_syncs(lambda: (int(seq.batch_sizes[0]), lstm(seq)[0].data.sum().item()))
    assert per == 2 and counts["aten::_local_scalar_dense"] == 2, counts

"""yolo's sync-free detection loss (tasks/yolo/loss.py) against ultralytics' v8DetectionLoss (the model's
`.loss`): the same values and gradients on the real tiny- and paper-preset heads, for random predictions and
targets (images without boxes, a batch without any, many boxes, two boxes claiming one anchor); a comparison
that catches a wrong gain or a dropped term; the host padding; and no host sync in the loss."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bench.experiments.syncs import count_host_syncs
from tasks.yolo import Yolo
from tasks.yolo.loss import DetectionLoss, criterion, pad_targets
from tests.helpers import preset_spec

pytestmark = pytest.mark.usefixtures("one_thread")

RTOL = 1e-5  # relative, on each of the three loss terms and on the gradients (against their largest entry)


@pytest.fixture(scope="module", params=["tiny", "paper"])
def model(request: pytest.FixtureRequest) -> Any:
    """The preset's real DetectionModel (the paper's: 104 M parameters, built once; no forward pass is run)."""
    torch.manual_seed(0)
    cfg = preset_spec("yolo", request.param)
    m = Yolo().build_model(cfg).train()
    m.imgsz = int(cfg.data["imgsz"])
    return m


def predictions(model: Any, images: int, gen: torch.Generator) -> dict[str, Any]:
    """Random raw head outputs of the training layout, leaves that require grad (feats: only their shapes
    are read)."""
    head, size = model.model[-1], model.imgsz
    feats = [torch.zeros(images, 1, size // int(s), size // int(s)) for s in head.stride.tolist()]
    anchors = sum(f.shape[2] * f.shape[3] for f in feats)
    boxes = (2 * torch.randn(images, 4 * head.reg_max, anchors, generator=gen)).requires_grad_()
    scores = (torch.randn(images, head.nc, anchors, generator=gen) - 2).requires_grad_()
    return {"boxes": boxes, "scores": scores, "feats": feats}


def targets(counts: list[int], nc: int, gen: torch.Generator, side: tuple[float, float] = (0.05, 0.6)):
    """ultralytics' collated rows (batch_idx, cls, normalised cx cy w h) for `counts` boxes per image."""
    k = sum(counts)
    wh = side[0] + (side[1] - side[0]) * torch.rand(k, 2, generator=gen)
    xy = wh / 2 + (1 - wh) * torch.rand(k, 2, generator=gen)
    return {
        "batch_idx": torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts)).float(),
        "cls": torch.randint(0, nc, (k, 1), generator=gen).float(),
        "bboxes": torch.cat([xy, wh], 1),
    }


def both(model: Any, preds: dict[str, Any], batch: dict[str, Any], loss: DetectionLoss | None = None):
    """(ultralytics' [box, cls, dfl] / b and its gradients, ours and its gradients), gradients with respect to
    the raw box and score outputs."""
    images = preds["boxes"].shape[0]
    ref = model.loss(batch, preds)[0] / images
    ref_grads = torch.autograd.grad(ref.sum(), (preds["boxes"], preds["scores"]))
    t, mask = pad_targets(batch["batch_idx"], batch["cls"], batch["bboxes"], images)
    ours = (loss or criterion(model))(preds, t, mask)
    grads = torch.autograd.grad(ours.sum(), (preds["boxes"], preds["scores"]))
    return (ref.detach(), ref_grads), (ours.detach(), grads)


def agree(a: tuple, b: tuple, rtol: float = RTOL) -> bool:
    """Loss terms equal to rtol (relative, with an absolute floor of rtol for a term that is 0) and each
    gradient equal to rtol times its largest entry."""
    (la, ga), (lb, gb) = a, b
    if not torch.allclose(la, lb, rtol=rtol, atol=rtol):
        return False
    scales = [rtol * float(x.abs().max().clamp(min=1e-12)) for x in ga]
    return all(torch.allclose(x, y, rtol=0, atol=s) for x, y, s in zip(ga, gb, scales, strict=True))


def relative_error(a: tuple, b: tuple) -> float:
    (la, ga), (lb, gb) = a, b
    errs = [float(((la - lb).abs() / la.abs().clamp(min=1e-12)).max())]
    errs += [float((x - y).abs().max() / x.abs().max().clamp(min=1e-12)) for x, y in zip(ga, gb, strict=True)]
    return max(errs)


CASES = {
    "mixed": [3, 0, 1, 6],  # images without boxes beside images with some
    "no_boxes": [0, 0, 0],  # ultralytics pads to 0 rows and its assigner returns early; ours has 1 masked row
    "many": [40, 25],  # far more boxes than top-k anchors per box can be disjoint
    "one_image": [2],
}


@pytest.mark.parametrize("case", list(CASES))
def test_equals_ultralytics_loss_and_gradients(model: Any, case: str) -> None:
    gen = torch.Generator().manual_seed(len(case))
    counts = CASES[case]
    preds = predictions(model, len(counts), gen)
    ref, ours = both(model, preds, targets(counts, model.model[-1].nc, gen))
    assert agree(ref, ours), (case, ref[0], ours[0], relative_error(ref, ours))
    box, cls, dfl = ref[0].tolist()
    assert cls > 0 and ((box > 0 and dfl > 0) if sum(counts) else (box == dfl == 0))


class Spy:
    """Records the most boxes that claim one anchor before ultralytics resolves it (select_highest_overlaps)."""

    def __init__(self, assigner: Any) -> None:
        self.inner, self.claims = assigner.select_highest_overlaps, 0

    def __call__(self, mask_pos, *args):
        self.claims = max(self.claims, int(mask_pos.sum(-2).max()))
        return self.inner(mask_pos, *args)


def test_an_anchor_claimed_by_two_boxes(model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two near-identical boxes rank the same anchors top: anchors claimed twice go to the box of larger IoU
    (ultralytics' `fg_mask.max() > 1` case, resolved by torch.where in both)."""
    gen = torch.Generator().manual_seed(7)
    preds = predictions(model, 2, gen)
    batch = targets([2, 3], model.model[-1].nc, gen)
    batch["bboxes"][1] = batch["bboxes"][0] * torch.tensor([1.0, 1.0, 0.95, 0.9])
    batch["bboxes"][3] = batch["bboxes"][2] * torch.tensor([1.01, 0.99, 0.9, 1.0])
    model.loss(batch, preds)  # builds ultralytics' criterion
    theirs, ours = Spy(model.criterion.assigner), Spy(criterion(model).assigner)
    monkeypatch.setattr(model.criterion.assigner, "select_highest_overlaps", theirs)
    monkeypatch.setattr(criterion(model).assigner, "select_highest_overlaps", ours)
    ref, mine = both(model, preds, batch)
    assert theirs.claims == ours.claims >= 2
    assert agree(ref, mine), relative_error(ref, mine)


def test_the_comparison_catches_a_wrong_gain_or_a_dropped_term(model: Any) -> None:
    gen = torch.Generator().manual_seed(3)
    preds = predictions(model, 2, gen)
    batch = targets([4, 2], model.model[-1].nc, gen)
    right = both(model, preds, batch)
    assert agree(*right)
    wrong_gain = DetectionLoss(model)
    wrong_gain.gains = (7.5, 0.5, 1.5 * (1 + 1e-4))  # dfl gain off by 0.01 %
    assert not agree(*both(model, preds, batch, wrong_gain))

    class NoDFL(DetectionLoss):
        def __call__(self, *args: Any) -> torch.Tensor:
            return super().__call__(*args) * torch.tensor([1.0, 1.0, 0.0])

    assert not agree(*both(model, preds, batch, NoDFL(model)))


def test_the_loss_makes_no_host_sync(model: Any) -> None:
    """Counted as bench.experiments.syncs counts (ultralytics': 6 on the tiny head, 7 on the paper's)."""
    gen = torch.Generator().manual_seed(1)
    preds = predictions(model, 3, gen)
    batch = targets([2, 0, 5], model.model[-1].nc, gen)
    t, mask = pad_targets(batch["batch_idx"], batch["cls"], batch["bboxes"], 3)
    loss = criterion(model)

    def step() -> None:
        loss(preds, t, mask).sum().backward()

    assert count_host_syncs(step) == (0, {})
    model.loss(batch, preds)  # ultralytics builds its criterion at the first call (reading the strides once)
    per, counts = count_host_syncs(lambda: model.loss(batch, preds)[0].sum().backward())
    assert per == 4 + len(model.model[-1].stride), counts  # unique, counts.max(), 2 nonzero, 1 per scale


def test_pad_targets_on_the_host() -> None:
    rows = targets([2, 0, 3], 5, torch.Generator().manual_seed(0))
    t, mask = pad_targets(rows["batch_idx"], rows["cls"], rows["bboxes"], 4)
    assert t.shape == (4, 3, 5) and mask.tolist() == [[True] * 2 + [False], [False] * 3, [True] * 3, [False] * 3]
    assert torch.equal(t[mask], torch.cat([rows["cls"], rows["bboxes"]], 1))  # each image's rows, in order
    assert not t[~mask].any()  # zero padding, as ultralytics pads
    t, mask = pad_targets(torch.zeros(0), torch.zeros(0, 1), torch.zeros(0, 4), 2)
    assert t.shape == (2, 1, 5) and not mask.any()
    with pytest.raises(ValueError, match="grouped"):
        pad_targets(torch.tensor([1.0, 0.0]), torch.zeros(2, 1), torch.zeros(2, 4), 2)

"""microbatch_mode=batched: one vectorised pass over the A micro-batches gives what A sequential passes
give (ḡ, sum_sq, mean_sq, BatchNorm running statistics) to float rounding, and falls back to the
sequential path, with a notice, where it cannot."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from bench.core.engine.batched import BatchedMicrobatches, pairwise_sum, stack_microbatches
from bench.core.engine.batchnorm import RunningStats
from bench.core.errors import UserError
from tests.helpers import records, spec_for, train

pytestmark = pytest.mark.usefixtures("one_thread")
RTOL = 1e-5


class _Loss:
    def loss(self, model, batch):  # noqa: ANN001, ANN201
        x, y = batch
        return F.cross_entropy(model(x), y)


def test_pairwise_sum_is_the_tree_sum_and_stacking_refuses_ragged_batches() -> None:
    x = torch.randn(5, 3)
    assert torch.equal(pairwise_sum(x), ((x[0] + x[1]) + (x[2] + x[3])) + x[4])
    assert stack_microbatches([(torch.zeros(2, 3), torch.zeros(2))] * 3)[0].shape == (3, 2, 3)
    assert stack_microbatches([torch.zeros(2), torch.zeros(3)]) is None
    assert stack_microbatches([{"a": 1}, {"a": 1}]) is None


def _sequential(model: nn.Module, micro: list) -> tuple[list[torch.Tensor], float, float]:
    """The reference: A plain passes, on PyTorch's native CPU kernels. oneDNN's float32 convolution backward
    is not a reference everywhere: on an AMD EPYC with AVX-512 (torch 2.11.0) it gave this test's second
    iteration a gradient 2e-4 away from the float64 computation, where the native kernels and the batched
    path both stay within 7e-8 of it."""
    grads = []
    for batch in micro:
        model.zero_grad(set_to_none=True)
        with torch.backends.mkldnn.flags(enabled=False):
            _Loss().loss(model, batch).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    gbar = [torch.stack(g).double().mean(0) for g in zip(*grads, strict=True)]
    sum_sq = sum(float(g.double().square().sum()) for gs in grads for g in gs)
    return gbar, sum_sq, sum(float(g.square().sum()) for g in gbar)


def test_each_step_gives_the_sequential_gradients_statistics_and_running_stats() -> None:
    """Three iterations; each starts both paths from the same weights (the sequential ḡ is applied to
    both: a chaotic net amplifies 1e-7 into 1e-3 within a few steps, see bench.core.engine.reduction), while
    each path's BatchNorm running statistics carry on from its own previous ones."""
    from tasks.cifar10.model import PreActResNet18

    torch.manual_seed(0)
    model = PreActResNet18(width=4, num_classes=10).train()
    ref = copy.deepcopy(model)
    batched = BatchedMicrobatches(model, _Loss())
    bn = RunningStats.for_model(model)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        micro = [(torch.randn(6, 3, 32, 32, generator=g), torch.randint(0, 10, (6,), generator=g)) for _ in range(5)]
        bn.begin(5)  # type: ignore[union-attr]
        loss, sum_sq, mean_sq = batched.accumulate(micro, 5, True, bn)
        bn.end()  # type: ignore[union-attr]  # each micro-batch's statistics replayed in order
        gbar, want_sum_sq, want_mean_sq = _sequential(ref, micro)
        for p, want in zip(model.parameters(), gbar, strict=True):
            torch.testing.assert_close(p.grad.double(), want, rtol=RTOL, atol=1e-7)
        assert sum_sq == pytest.approx(want_sum_sq, rel=RTOL)
        assert mean_sq == pytest.approx(want_mean_sq, rel=RTOL)
        assert torch.isfinite(torch.tensor(loss))
        for (name, got), want in zip(model.named_buffers(), ref.buffers(), strict=True):
            torch.testing.assert_close(got, want, rtol=RTOL, atol=1e-7, msg=name)
        with torch.no_grad():
            for p, q, step in zip(model.parameters(), ref.parameters(), gbar, strict=True):
                q.sub_(0.1 * step.float())
                p.copy_(q)
                p.grad = q.grad = None


def test_random_ops_fall_back_with_a_notice_and_touch_nothing() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3)).train()
    said: list[str] = []
    batched = BatchedMicrobatches(model, _Loss(), warn=said.append)
    micro = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]
    assert batched.accumulate(micro, scale=3) is None
    assert len(said) == 1 and "torch.func cannot run this model" in said[0]
    assert all(p.grad is None for p in model.parameters())
    assert batched.accumulate(micro, scale=3) is None and len(said) == 1  # once per run


def test_an_unknown_mode_is_a_user_error() -> None:
    with pytest.raises(UserError, match="microbatch_mode"):
        spec_for("logreg", microbatch_mode="parallel")  # the schema's values: none reaches the engine


@pytest.mark.parametrize("task", ["logreg", "cifar10"])
def test_a_batched_run_follows_the_sequential_run(tmp_path: Path, task: str) -> None:
    """Through the engine: logreg (convex, no BatchNorm) stays within float rounding for the whole run;
    the tiny ResNet is chaotic (1e-7 grows to 1e-3 in a few steps), so its first iteration is compared."""
    runs = {}
    for mode in ("sequential", "batched"):
        spec = spec_for(task, "adascale", 8, T1={"logreg": 80, "cifar10": 16}[task], microbatch_mode=mode)
        summary, _ = train(spec, tmp_path / mode)
        assert summary["status"] == "completed"
        runs[mode] = records(tmp_path / mode)
    seq, bat = runs["sequential"], runs["batched"]
    compared = seq if task == "logreg" else seq[:1]
    assert len(bat) >= len(compared) >= 1
    for x, y in zip(compared, bat, strict=False):
        for key in ("loss", "sum_sq", "mean_sq", "gain", "lr", "tau"):
            assert y[key] == pytest.approx(x[key], rel=RTOL), (x["iteration"], key)

"""The statistics and the averaged gradient of one iteration, against brute force (docs/design.md §1)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from bench.core.engine.accumulate import accumulate
from bench.core.engine.distributed import Dist
from bench.core.engine.gradstats import SquaredNormHooks


class BNNet(nn.Module):
    """A small conv net with BatchNorm, so per-micro-batch normalisation matters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


class CE:
    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)


def batches(S: int, b: int = 6) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(b, 3, 8, 8, generator=g), torch.randint(0, 5, (b,), generator=g)) for _ in range(S)]


@pytest.mark.parametrize("S", [2, 4])
def test_hooks_match_one_backward_per_microbatch(S: int) -> None:
    torch.manual_seed(0)
    model = BNNet()
    brute = copy.deepcopy(model)
    mbs = batches(S)
    params = list(model.parameters())
    hooks = SquaredNormHooks(params)
    loss, sum_sq, mean_sq = accumulate(model, CE(), iter(mbs), list(range(S)), params, hooks, S, Dist())
    hooks.remove()

    grads = []
    for x, y in mbs:
        brute.zero_grad()
        F.cross_entropy(brute(x), y).backward()
        grads.append(torch.cat([p.grad.flatten() for p in brute.parameters()]).double())
    expected_sum = sum(float(g.square().sum()) for g in grads)
    gbar = torch.stack(grads).mean(0)
    assert sum_sq == pytest.approx(expected_sum, rel=1e-5)
    assert mean_sq == pytest.approx(float(gbar.square().sum()), rel=1e-5)
    got = torch.cat([p.grad.flatten() for p in model.parameters()]).double()
    assert float((got - gbar).norm() / gbar.norm()) < 1e-6
    assert sum_sq > S * mean_sq  # noisy micro-batches: the statistics are not degenerate


def test_gbar_is_the_gradient_of_the_mean_of_the_microbatch_losses() -> None:
    S = 4
    torch.manual_seed(1)
    model = BNNet()
    ref = copy.deepcopy(model)
    mbs = batches(S)
    params = list(model.parameters())
    loss, _, _ = accumulate(model, CE(), iter(mbs), [0] * S, params, None, S, Dist())
    # one graph: the mean of S separately normalised micro-batch losses
    losses = [F.cross_entropy(ref(x), y) for x, y in mbs]
    total = torch.stack(losses).mean()
    total.backward()
    assert loss == pytest.approx(total.item(), rel=1e-6)
    got = torch.cat([p.grad.flatten() for p in model.parameters()]).double()
    want = torch.cat([q.grad.flatten() for q in ref.parameters()]).double()
    assert float((got - want).norm() / want.norm()) < 1e-6


def test_scale_one_needs_no_hooks() -> None:
    torch.manual_seed(2)
    model = BNNet()
    (mb,) = batches(1)
    params = list(model.parameters())
    _, sum_sq, mean_sq = accumulate(model, CE(), iter([mb]), [0], params, None, 1, Dist())
    assert sum_sq == mean_sq > 0

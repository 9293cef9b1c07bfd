"""bench.core.engine.sgdstep against torch.optim.SGD.step() + zero_grad(set_to_none=True): the same bits."""

from __future__ import annotations

import pytest
import torch

from bench.core.engine import sgdstep

SETTINGS = [
    {"momentum": 0.0},
    {"momentum": 0.9},
    {"momentum": 0.9, "weight_decay": 5e-4},
    {"momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
    {"momentum": 0.5, "dampening": 0.3},
    {"momentum": 0.9, "maximize": True},
    {"momentum": 0.9, "weight_decay": 5e-4, "foreach": False},
]


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 3), (3,), (2, 2, 5), (1,)]
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]


def _grads(params: list[torch.nn.Parameter], t: int) -> None:
    """Gradients for step t; the last parameter gets none on odd steps (unused by that iteration)."""
    g = torch.Generator().manual_seed(100 + t)
    for i, p in enumerate(params):
        p.grad = None if (i == len(params) - 1 and t % 2) else torch.randn(p.shape, generator=g)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_same_bits_as_optimizer_step(settings: dict) -> None:
    ours, theirs = _params(0), _params(0)
    kw = {"foreach": True} | settings
    opt_ours = torch.optim.SGD(ours, lr=0.0, **kw)
    opt_theirs = torch.optim.SGD(theirs, lr=0.0, **kw)
    for t in range(5):
        lr = 0.1 / (t + 1)
        _grads(ours, t)
        _grads(theirs, t)
        sgdstep.step(opt_ours, lr)
        for group in opt_theirs.param_groups:
            group["lr"] = lr
        opt_theirs.step()
        opt_theirs.zero_grad(set_to_none=True)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)
            assert a.grad is None and b.grad is None
    # the checkpoint's view: the same state_dict (momentum buffers, lr), and it loads into a fresh SGD
    s_ours, s_theirs = opt_ours.state_dict(), opt_theirs.state_dict()
    assert s_ours["param_groups"] == s_theirs["param_groups"]
    assert s_ours["state"].keys() == s_theirs["state"].keys()
    for k, v in s_theirs["state"].items():
        assert torch.equal(s_ours["state"][k]["momentum_buffer"], v["momentum_buffer"])


def test_differs_when_a_setting_is_dropped() -> None:
    """The comparison above can fail: a step that ignored weight decay ends elsewhere."""
    ours, theirs = _params(0), _params(0)
    opt_ours = torch.optim.SGD(ours, lr=0.0, momentum=0.9, weight_decay=0.0, foreach=True)
    opt_theirs = torch.optim.SGD(theirs, lr=0.0, momentum=0.9, weight_decay=5e-4, foreach=True)
    _grads(ours, 0)
    _grads(theirs, 0)
    sgdstep.step(opt_ours, 0.1)
    opt_theirs.param_groups[0]["lr"] = 0.1
    opt_theirs.step()
    assert not all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))

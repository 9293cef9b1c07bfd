"""AdamW in the one engine (spec `optimizer: adamw`, issue 60): bench.core.engine.adamwstep takes torch.optim.AdamW's
step bit for bit, a run stopped at a checkpoint and started again ends record for record like one that was not
(the moment estimates and step counts travel in the checkpoint), and S = W × A splits give the same run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.core.engine import adamwstep, loop
from bench.core.engine.distributed import TIMEOUT_ENV
from bench.core.engine.signals import Interrupted
from bench.core.errors import UserError
from bench.core.files import CHECKPOINT, METRICS, SUMMARY, read_json, read_jsonl
from tests.helpers import spec_for, train

SETTINGS = [
    {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
    {"betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.01},
    {"betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1, "foreach": False},
]


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in [(7, 3), (3,), (2, 2, 5), (1,)]]


def _grads(params: list[torch.nn.Parameter], t: int) -> None:
    """Gradients for step t; the last parameter gets none on odd steps (unused by that iteration)."""
    g = torch.Generator().manual_seed(100 + t)
    for i, p in enumerate(params):
        p.grad = None if (i == len(params) - 1 and t % 2) else torch.randn(p.shape, generator=g)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_same_bits_as_adamw_step(settings: dict) -> None:
    ours, theirs = _params(0), _params(0)
    kw = {"foreach": True} | settings
    opt_ours, opt_theirs = torch.optim.AdamW(ours, lr=0.0, **kw), torch.optim.AdamW(theirs, lr=0.0, **kw)
    for t in range(6):
        lr = 0.01 / (t + 1)
        _grads(ours, t)
        _grads(theirs, t)
        adamwstep.step(opt_ours, lr, settings["betas"], settings["eps"])
        opt_theirs.param_groups[0]["lr"] = lr
        opt_theirs.step()
        opt_theirs.zero_grad(set_to_none=True)
        assert all(torch.equal(a, b) and a.grad is None for a, b in zip(ours, theirs, strict=True))
    # the checkpoint's view: the same state_dict (moments, step counts, lr), which loads into a fresh AdamW
    s_ours, s_theirs = opt_ours.state_dict(), opt_theirs.state_dict()
    assert s_ours["param_groups"] == s_theirs["param_groups"]
    for k, v in s_theirs["state"].items():
        assert s_ours["state"][k].keys() == v.keys() == {"step", "exp_avg", "exp_avg_sq"}
        assert all(torch.equal(s_ours["state"][k][n], v[n]) for n in v)


def test_a_step_with_other_betas_differs() -> None:
    """The comparison above can fail: the betas a rule passes are the ones used."""
    ours, theirs = _params(0), _params(0)
    opt_ours, opt_theirs = torch.optim.AdamW(ours, lr=0.0), torch.optim.AdamW(theirs, lr=0.0)
    for t in range(2):
        _grads(ours, t)
        _grads(theirs, t)
        adamwstep.step(opt_ours, 0.01, (0.9, 0.999), 1e-8)
        adamwstep.step(opt_theirs, 0.01, (0.5, 0.999), 1e-8)
    assert not all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_adam_keys_are_checked_and_sgd_specs_keep_their_identity() -> None:
    sgd = spec_for("logreg", "lsw", 2)
    assert "optimizer" not in sgd.identity and "betas" not in sgd.identity  # at the default: the same run as before
    adam = spec_for("logreg", "lsw", 2, optimizer="adamw", betas=[0.8, 0.99])
    assert adam.identity["optimizer"] == "adamw"
    assert adam.differs_from(sgd.to_json()) == ["betas", "optimizer", "overrides"]
    with pytest.raises(UserError, match="eps is AdamW's"):
        spec_for("logreg", "lsw", 2, eps=1e-6)
    with pytest.raises(UserError, match="betas"):
        spec_for("logreg", "lsw", 2, optimizer="adamw", betas=[0.9, 1.0])
    with pytest.raises(UserError, match="optimizer"):
        spec_for("logreg", "lsw", 2, optimizer="adam")


def _metrics(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in read_jsonl(run_dir / METRICS)]


def test_a_stopped_adamw_run_resumes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped a few iterations in (a stop signal's checkpoint), then run again: every record the same bits as
    the uninterrupted run's, and the checkpoint held AdamW's moments and step counts."""
    spec = spec_for("logreg", "lsw", 4, T1=80, optimizer="adamw", **{"lr_schedule.lr0": 0.01})
    train(spec, tmp_path / "ref")
    calls = iter(range(10**6))
    monkeypatch.setattr(loop, "stop_requested", lambda: next(calls) == 7)
    with pytest.raises(Interrupted):
        train(spec, tmp_path / "cut")
    ckpt = torch.load(tmp_path / "cut" / CHECKPOINT, weights_only=True)
    state = ckpt["optimizer"]["state"]
    assert state and all(s.keys() == {"step", "exp_avg", "exp_avg_sq"} for s in state.values())
    assert {float(s["step"]) for s in state.values()} == {float(ckpt["state"]["iteration"])} != {0.0}
    monkeypatch.setattr(loop, "stop_requested", lambda: False)
    train(spec, tmp_path / "cut")
    assert _metrics(tmp_path / "cut") == _metrics(tmp_path / "ref") and len(_metrics(tmp_path / "ref")) > 20


def _cli(out: Path, *extra: str) -> list[str]:
    args = [sys.executable, "-m", "bench", "run", "--task", "logreg", "--method", "lsw", "--scale", "4", "--seed", "0"]
    for s in ("T1=80", "optimizer=adamw", "lr_schedule.lr0=0.01", "weight_decay=0.01"):
        args += ["--set", s]
    return [*args, "--out", str(out), *extra]


@pytest.mark.slow
def test_any_split_of_S_gives_the_same_adamw_run(tmp_path: Path) -> None:
    """S = 4 as W = 1 × A = 4 and W = 2 × A = 2 (gloo, DDP): every record and the summary the same bits."""
    env = {**os.environ, TIMEOUT_ENV: "20", "PYTHONUNBUFFERED": "1"}
    for name, extra in (("w1", ()), ("w2", ("--ranks", "2"))):
        res = subprocess.run(_cli(tmp_path / name, *extra), env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    one, two = (next((tmp_path / n).glob("logreg/*/*/*")) for n in ("w1", "w2"))
    assert _metrics(one) == _metrics(two)
    assert sum(not r.get("eval") for r in _metrics(one)) == 20 and any(r.get("eval") for r in _metrics(one))
    summary = [{k: v for k, v in read_json(d / SUMMARY).items() if "wall" not in k} for d in (one, two)]
    assert summary[0]["train_loss"] == summary[1]["train_loss"] and read_json(two / "spec.json")["ranks"] == 2

"""The oracle of `adamscale` (issue 60.3): its per-step factors, the lr multiplier √r_t and the progress r_t, against
AdaptDL 0.2.11's own AdamScale on the same gradients, to 1e-6 at every step.

AdaptDL is a numerical reference only: `make` installs it with `--no-deps` (and the three small modules its
package imports when loaded: portpicker, semver, autograd) into `.venv/adaptdl-ref`, outside the venv's
site-packages, so nothing else can import it; nothing is downloaded when the tests run. It is imported in a
subprocess, with that folder last on its path. AdaptDL's side is its classes as its AdaptiveDataParallel wires them
for AdamW (`AdamScale` with `AdamGradientNoiseScale`, one replica, A micro-batches accumulated with
`require_backward_grad_sync` set on the last): its backward hooks and callbacks see the micro-batch gradients, and
its `scale_lr` and `progress` give the factors. Ours is what the engine calls: bench.core.engine.precond's hooks,
bench.core.algo.gain.AdaptDLGain, the `adamscale` rule, bench.core.engine.adamwstep. Both start from the same weights
and batches, and both step with AdaptDL's lr (bench.core.engine.adamwstep takes AdamW.step's bits:
tests/engine/test_adamw.py), so every step's factors are computed from the same gradients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REF_ENV = "ADASCALE_BENCH_ADAPTDL_REF"  # another folder holding the reference (a test of this test, a CI cache)


def reference_folder() -> Path:
    return Path(os.environ.get(REF_ENV) or Path(sys.prefix) / "adaptdl-ref")


SCRIPT = r"""
import json, sys
sys.path.append(sys.argv[1])
import torch
from torch import nn
from adaptdl.torch.gradient_noise_scale import AdamGradientNoiseScale
from adaptdl.torch.scaling_rules import AdamScale as TheirAdamScale

from bench.core import methods as registry

from bench.core.algo import rules
from bench.core.algo.gain import UnbiasedGain, AdaptDLGain
from bench.core.engine import adamwstep, precond
from bench.core.engine.distributed import Dist
from bench.core.engine.precond import PreconditionedNorms

LR, BETAS, EPS, WD = 0.02, (0.9, 0.99), 1e-8, 0.01


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))


def loss(net, batch):
    x, y = batch
    return ((net(x) - y) ** 2).mean()


class Adp:  # what AdaptDL's classes read of AdaptiveDataParallel
    require_backward_grad_sync = True


def theirs_factors(A, data):
    net = model()
    opt = torch.optim.AdamW(net.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    adp = Adp()
    adp.gns = AdamGradientNoiseScale(adp, opt, num_replicas=1, accum_scale=1)
    rule = TheirAdamScale()
    rule.initialize(adp, opt)
    out = []
    for batches in data:
        for i, b in enumerate(batches):  # A micro-batches accumulated, the callbacks on the last
            adp.require_backward_grad_sync = i == A - 1
            loss(net, b).backward()
        scale = adp.gns.accum_scale * adp.gns.accum_count
        lr_factor = float(rule.scale_lr(scale)[0])  # what its step multiplies the lr by
        before = adp.gns.get_progress()
        for p in net.parameters():
            p.grad.div_(A)  # AdamW steps on the mean, as ours (its statistics have read grad / A already)
        rule.step()
        out.append([lr_factor, adp.gns.get_progress() - before])
        rule.zero_grad()
    return out


def ours_factors(A, data, mode, theirs):
    precond.PLAIN_STEPS = 10**9 if mode == "raw" else 5  # controls that must fail: the raw gradient's gain,
    net = model()  # or the paper's averaging
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=0.0, betas=BETAS, eps=EPS, weight_decay=WD, foreach=True)
    norms = PreconditionedNorms(params, opt, BETAS[1], EPS)
    gain = UnbiasedGain() if mode == "paper" else AdaptDLGain()
    rule = registry.make_rule("adamscale", rules.ScaleSchedule.constant(A), 1000)
    out = []
    for t, batches in enumerate(data):
        norms.begin()
        for b in batches:
            loss(net, b).backward()
        for p in params:
            p.grad.div_(A)
        m, p_t, w = rule.factors(t, A, gain.update(*norms.take(Dist()), A))
        adamwstep.step(opt, LR * theirs[t][0] * w, BETAS, EPS)  # AdaptDL's lr: the same weights, the same g_i
        out.append([m, p_t])
    norms.remove()
    return out


result = {}
for A, mode, steps in ((2, "engine", 30), (4, "engine", 30), (4, "raw", 12), (4, "paper", 12)):
    g = torch.Generator().manual_seed(A)
    data = [[(torch.randn(5, 6, generator=g), torch.randn(5, 1, generator=g)) for _ in range(A)] for _ in range(steps)]
    theirs = theirs_factors(A, data)
    mine = ours_factors(A, data, mode, theirs)
    result[f"{A},{mode}"] = [{"ours": o, "theirs": t} for o, t in zip(mine, theirs)]
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def oracle() -> dict[str, list[dict]]:
    """{"A,mode": per step {"ours": [m, p], "theirs": [lr factor, progress]}}, from one subprocess."""
    ref = reference_folder()
    if not (ref / "adaptdl" / "torch" / "scaling_rules.py").is_file():
        pytest.fail(
            f"AdaptDL 0.2.11, the reference, is not at {ref}: `make` installs it there (the Makefile's "
            f"$(VENV)/.installed recipe), or set ${REF_ENV}"
        )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ref)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("accum", [2, 4])
def test_adamscale_factors_equal_adaptdls_at_every_step(oracle: dict, accum: int) -> None:
    """30 steps: the first 5 on the raw gradient (AdaptDL's P = 1 while Adam's step count is below 5), the rest
    on the preconditioned one; the lr multiplier and the progress agree to 1e-6 at every one, and the gain moves
    (so the comparison is of something that changes)."""
    steps = oracle[f"{accum},engine"]
    for t, s in enumerate(steps):
        for ours, theirs in zip(s["ours"], s["theirs"], strict=True):
            assert abs(ours - theirs) <= 1e-6 * max(1.0, abs(theirs)), (t, s)
    gains = [s["theirs"][1] for s in steps]
    assert max(gains) - min(gains) > 1e-2 and all(1.0 <= g <= accum + 1e-9 for g in gains)


@pytest.mark.parametrize("mode", ["raw", "paper"])
def test_the_oracle_tells_another_gain_apart(oracle: dict, mode: str) -> None:
    """The comparison can fail: the gain of the raw gradient (no preconditioner), or of the paper's averaging
    (clamped moments, θ = 1 − S/1000), gives factors that differ from AdaptDL's by more than 1e-6."""
    steps = oracle[f"4,{mode}"]
    worst = max(abs(o - t) for s in steps for o, t in zip(s["ours"], s["theirs"], strict=True))
    assert worst > 1e-5, worst

"""The rules for AdamW (issue 60): sqrt-sde's hyperparameters are Malladi et al.'s formulas, adamscale's factors
are AdaScale's gain to the power ½ (lr) and the gain itself (clock), each rule runs only with its optimizer
(adascale under AdamW is refused in one line naming adamscale), and a user's rule may set AdamW's betas and eps,
which the run then uses."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from bench.core import methods as registry
from bench.core.algo import rules
from bench.core.algo.rules import METHODS, adam_hyper, refusal
from bench.core.errors import UserError
from bench.core.files import METRICS, read_jsonl
from tests.helpers import spec_for, train


@pytest.mark.parametrize("kappa", [1, 2, 4, 8])
@pytest.mark.parametrize(("betas", "eps"), [((0.9, 0.999), 1e-8), ((0.95, 0.99), 1e-6)])
def test_sqrt_sde_is_the_papers_square_root_rule(kappa: int, betas: tuple[float, float], eps: float) -> None:
    """Malladi et al. 2022 (Definition of the square-root scaling rule for Adam): batch ×κ → η√κ,
    1 − β₁ → κ(1 − β₁), 1 − β₂ → κ(1 − β₂), ε → ε/√κ; each step worth κ base steps."""
    rule = registry.make_rule("sqrt-sde", rules.ScaleSchedule.constant(kappa), 100)
    m, p, w = rule.factors(3, kappa, 1.7)  # the gain is not read
    (b1, b2), e = adam_hyper(rule, 3, kappa, betas, eps)
    assert m == pytest.approx(math.sqrt(kappa), rel=1e-15) and p == kappa and w == 1.0
    assert 1 - b1 == pytest.approx(kappa * (1 - betas[0]), rel=1e-12)
    assert 1 - b2 == pytest.approx(kappa * (1 - betas[1]), rel=1e-9)
    assert e == pytest.approx(eps / math.sqrt(kappa), rel=1e-15)
    assert ((b1, b2), e) == (betas, eps) if kappa == 1 else b1 < betas[0]


def test_sqrt_sde_is_refused_where_a_beta_would_turn_negative(tmp_path: Path) -> None:
    rule = registry.make_rule("sqrt-sde", rules.ScaleSchedule.constant(16), 100)
    with pytest.raises(UserError, match=r"S\(1 − β\) < 1 \(here S < 10\)"):
        adam_hyper(rule, 0, 16, (0.9, 0.999), 1e-8)
    with pytest.raises(UserError, match="S < 10"):  # refused before the run's first step
        train(spec_for("logreg", "sqrt-sde", 16, T1=64, optimizer="adamw"), tmp_path)
    assert not (tmp_path / METRICS).exists()


@pytest.mark.parametrize("gain", [1.0, 2.5, 4.0])
def test_adamscale_scales_the_lr_by_the_square_root_of_the_gain_and_the_clock_by_the_gain(gain: float) -> None:
    rule = registry.make_rule("adamscale", rules.ScaleSchedule.constant(4), 100)
    assert rule.factors(7, 4, gain) == (math.sqrt(gain), gain, 1.0)
    assert adam_hyper(rule, 7, 4, (0.9, 0.999), 1e-8) == ((0.9, 0.999), 1e-8)  # betas and eps as given


def test_each_rule_runs_only_with_its_optimizer() -> None:
    assert refusal(METHODS["adascale"], "adamw") == "method adascale is not for optimizer adamw: use adamscale"
    assert refusal(METHODS["adamscale"], "sgd") == "method adamscale is for optimizer adamw only; with sgd use adascale"
    assert refusal(METHODS["sqrt-sde"], "sgd") == "method sqrt-sde is for optimizer adamw only"
    for name in ("lsw", "sqrt"):  # as they are, under either optimizer
        assert refusal(METHODS[name], "sgd") is None and refusal(METHODS[name], "adamw") is None
    assert refusal(METHODS["adascale"], "sgd") is None and refusal(METHODS["adamscale"], "adamw") is None
    with pytest.raises(UserError, match="^method adascale is not for optimizer adamw: use adamscale$"):
        spec_for("logreg", "adascale", 4, optimizer="adamw")
    with pytest.raises(UserError, match="for optimizer adamw only"):
        spec_for("logreg", "sqrt-sde", 4)
    assert (rules.shared_at_s1("sgd"), rules.shared_at_s1("adamw")) == ("adascale", "adamscale")


USER_RULE = '''
from dataclasses import dataclass

from bench.core.algo.rules import ScalingRule


@dataclass(frozen=True)
class NoMomentum(ScalingRule):
    """√S with β₁ = 0 at every S > 1, and ε × 10."""

    label, title, pace = "NM", "no momentum", "scale"

    def factors(self, t, scale, gain):
        return scale**0.5, float(scale), 1.0

    def adam(self, t, scale, betas, eps):
        return ((0.0 if scale > 1 else betas[0]), betas[1]), eps * 10


ROW = NoMomentum
'''


def test_a_users_rule_sets_the_betas_and_eps_the_run_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule's adam() reaches the step: the run differs from `sqrt` (the same lr factors) in every record past
    the first step, and the optimizer's group records the rule's β₁ and ε."""
    (tmp_path / "adam_user_rule.py").write_text(USER_RULE)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(registry, "_LOADED", {})
    monkeypatch.setattr(registry, "_DIGESTS", {})
    sets = {"T1": 40, "optimizer": "adamw", "lr_schedule.lr0": 0.01}
    _, engine = train(spec_for("logreg", "adam_user_rule:ROW", 4, **sets), tmp_path / "user")
    train(spec_for("logreg", "sqrt", 4, **sets), tmp_path / "sqrt")
    group = engine.optimizer.param_groups[0]
    assert group["betas"] == (0.0, 0.999) and group["eps"] == pytest.approx(1e-7)
    mine, theirs = ([r for r in read_jsonl(tmp_path / d / METRICS) if "eval" not in r] for d in ("user", "sqrt"))
    assert mine[0]["loss"] == theirs[0]["loss"] and mine[0]["lr"] == theirs[0]["lr"]
    assert mine[2]["loss"] != theirs[2]["loss"]
    sys.modules.pop("adam_user_rule", None)


LSW_PLUS_ADAMW = """preset: tiny
seeds: [0]
experiments:
  - table2:
      tasks: [transformer]
      methods: [adamscale, lsw+]
      scales: [1, 4]
      set: {optimizer: adamw, T1: 120}
"""


def test_lsw_plus_under_adamw_takes_its_adamscale_runs_count(tmp_path: Path) -> None:
    """LSW+ runs as many iterations as its gain-following twin: AdaScale's under SGD, AdamScale's under AdamW
    (bench.core.algo.rules.gain_rule); it waits for that run in the pool and reads its count (it looked for an AdaScale
    run AdamW refuses, and failed)."""
    from bench.cli import main
    from bench.core.files import SUMMARY, read_json

    (tmp_path / "m.yaml").write_text(LSW_PLUS_ADAMW)
    out = tmp_path / "out"
    assert main(["submit", str(tmp_path / "m.yaml"), "--executor", "debug", "--out", str(out)]) == 0
    (twin,) = (out / "transformer" / "adamscale" / "s4").iterdir()
    (lsw_plus,) = (out / "transformer" / "lsw+" / "s4").iterdir()
    iterations = read_json(twin / SUMMARY)["iterations"]
    summary = read_json(lsw_plus / SUMMARY)
    assert summary["T_AS"] == iterations and summary["iterations"] == iterations
    assert rules.gain_rule("sgd") == "adascale" and rules.gain_rule("adamw") == "adamscale"

"""Learning-rate schedules over τ and the (m_t, p_t, w_t) of each rule."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from pydantic import ValidationError

from bench.core.algo.rules import (
    LEGW,
    LEGW_BASE_WARMUP,
    METHODS,
    SHARED_AT_S1,
    WARMUP_FRACTION,
    Rule,
    RuleContext,
    advance,
    finished,
    iterations_for,
    planned_iterations,
    shares_s1,
    tau_after,
)
from bench.core.algo.schedules import ScaleSchedule, lr_schedule
from bench.core.errors import UserError
from bench.core.methods import check_row, make_rule, shared_note
from bench.core.runspec import Constant, Exponential, Step


def test_exponential_and_step_decay() -> None:
    exp = lr_schedule(Exponential(kind="exponential", lr0=0.1, decay=0.01), 1000)
    assert exp(0) == pytest.approx(0.1)
    assert exp(500) == pytest.approx(0.1 * 0.1)
    assert exp(1000) == pytest.approx(0.1 * 0.01)
    step = lr_schedule(Step(kind="step", lr0=1.0, gamma=0.1, milestones=[1 / 3, 2 / 3]), 900)
    assert [step(t) for t in (0, 299, 300, 599, 600, 899)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    assert lr_schedule(Constant(kind="constant", lr0=2), 10)(7) == 2.0
    with pytest.raises(ValidationError, match="lr0"):  # the schema's: a schedule is checked when it is made
        Exponential.model_validate({"kind": "exponential", "decay": 0.1})


def test_elastic_schedule_switches_at_quarter_and_half() -> None:
    up = ScaleSchedule.from_fractions([[0, 2], [0.25, 4], [0.5, 8]], 400)
    assert [up(t) for t in (0, 99.9, 100, 199.9, 200, 399)] == [2, 2, 4, 4, 8, 8]
    assert up.is_elastic and up.max_scale() == 8
    with pytest.raises(UserError):
        ScaleSchedule.from_fractions([[0.1, 2]], 400)


def test_lsw_iterations_warmup_and_definition_3() -> None:
    T1, S = 1000, 8
    rule = make_rule("lsw", ScaleSchedule.constant(S), T1)
    assert rule.total_iterations == math.ceil(T1 / S) == 125
    wu = WARMUP_FRACTION * 125
    m, p, w = rule.factors(0, S, gain=123.0)
    assert (m, p) == (S, S) and w == pytest.approx(1 / S)  # lr starts at S·(1/S)·lr(0) = lr(0)
    half = rule.factors(int(wu / 2), S, 1.0)[2]
    assert half == pytest.approx(1 / S + (1 - 1 / S) * int(wu / 2) / wu)
    assert rule.factors(math.ceil(wu), S, 1.0)[2] == 1.0  # then S·lr(S·t): Definition 3
    assert iterations_for(ScaleSchedule.constant(3), 10) == 4  # ⌈10/3⌉


def test_lsw_plus_runs_T_AS_iterations() -> None:
    T1 = 1000
    rule = make_rule("lsw+", ScaleSchedule.constant(8), T1, T_AS=301)
    tau, t = 0.0, 0
    while tau < T1 * (1 - 1e-9):
        m, p, w = rule.factors(t, 8, 1.0)
        tau += p
        t += 1
    assert t == 301
    assert rule.warmup_iterations == pytest.approx(WARMUP_FRACTION * 301)
    with pytest.raises(UserError, match="T_AS"):
        make_rule("lsw+", ScaleSchedule.constant(8), T1)


def test_adascale_identity_and_scaled_factors() -> None:
    s = ScaleSchedule.constant(4)
    assert make_rule("adascale", s, 100).factors(3, 4, 2.5) == (2.5, 2.5, 1.0)
    assert make_rule("identity", s, 100).factors(3, 4, 2.5) == (1.0, 1.0, 1.0)
    assert make_rule("scaled", s, 100, T=20).factors(0, 4, 2.5) == (1.0, 5.0, 1.0)
    with pytest.raises(UserError, match="unknown method"):
        make_rule("adam", s, 100)


# -- the closed form of τ (#33: plan walked τ to T1) ---------------------------------------------------------------
def _walk(scales: ScaleSchedule, T1: float, progress: float | None = None) -> tuple[int, float, int]:
    """The loop itself, one iteration at a time: what `advance` must equal."""
    tau, t, total = 0.0, 0, 0
    while not finished(tau, T1):
        s = scales(tau)
        tau += s if progress is None else progress
        total += s
        t += 1
    return t, tau, total


def _schedules(n: int) -> list[tuple[ScaleSchedule, float, float | None]]:
    """Elastic schedules (some steps out of order), fractional and integer T1 (some a hair either side of a
    multiple of S, inside and outside the 1e-9 tolerance), and fractional constant progress."""
    rng = random.Random(31)
    out = []
    for _ in range(n):
        T1 = rng.choice([rng.randint(1, 3000), rng.uniform(0.5, 3000), 960.0, 960 * (1 - 5e-10), 960 * (1 - 2e-9)])
        steps = [(0.0, rng.choice([1, 2, 3, 4, 7, 8, 64]))]
        steps += [(rng.uniform(0, 1.5) * T1, rng.choice([1, 2, 3, 4, 8, 128])) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.3:
            steps = [steps[0], *rng.sample(steps[1:], len(steps) - 1)]
        progress = None if rng.random() < 0.6 else rng.choice([1.0, 0.5, 1 / 3, 2.7, T1 / rng.randint(1, 500)])
        out.append((ScaleSchedule(tuple(steps)), T1, progress))
    return out


def test_closed_form_equals_the_walk() -> None:
    cases = _schedules(2000)
    for scales, T1, progress in cases:
        t, tau, total = advance(scales, T1, progress)
        assert (t, total) == _walk(scales, T1, progress)[::2], (scales, T1, progress)
        assert iterations_for(scales, T1, progress) == t
    # the tolerance: τ = 960 − 4.8e-7 counts as T1 = 960 (within 1e-9), τ = 960 − 1.9e-6 does not
    assert iterations_for(ScaleSchedule.constant(8), 960 * (1 + 5e-10)) == 120
    assert iterations_for(ScaleSchedule.constant(8), 960 * (1 + 2e-9)) == 121
    # τ after t iterations of p = S_t, across the steps of an elastic schedule
    up = ScaleSchedule.from_fractions([[0, 2], [0.25, 4], [0.5, 8]], 1000)
    walked, tau = [], 0.0
    for _ in range(300):
        walked.append(tau)
        tau += up(tau)
    assert [tau_after(up, t) for t in range(300)] == walked


def test_a_T1_of_1e9_is_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedule is asked once per constant-S stretch, whatever T1 (a count, not a timing: walking would ask
    it once per iteration, 12 500 times at T1 = 1e5)."""
    calls: list[float] = []
    real = ScaleSchedule.__call__
    monkeypatch.setattr(ScaleSchedule, "__call__", lambda self, tau: calls.append(tau) or real(self, tau))
    up = ScaleSchedule.from_fractions([[0, 2], [0.25, 4], [0.5, 8]], 1e5)
    assert iterations_for(up, 1e5) == 25_000 // 2 + 25_000 // 4 + 50_000 // 8
    assert len(calls) == 3
    calls.clear()
    paper = ScaleSchedule.from_fractions([[0, 32], [0.25, 64], [0.5, 128]], 1e9)
    assert advance(paper, 1e9) == (2.5e8 / 32 + 2.5e8 / 64 + 5e8 / 128, 1e9, 1e9)
    assert advance(paper, 1e9, 1.0)[0] == 999_999_999 and len(calls) == 6


# -- the peers' rules against their definitions --------------------------------------------------------------------
def test_square_root_scaling_is_sqrt_S_on_the_lsw_clock() -> None:
    """m = √S_t, p = S_t, no warm-up: ⌈T1/S⌉ iterations at a constant S, and S = 1 is identity scaling."""
    for S in (1, 2, 4, 9, 64):
        rule = make_rule("sqrt", ScaleSchedule.constant(S), 1000)
        assert all(rule.factors(t, S, 3.3) == (math.sqrt(S), float(S), 1.0) for t in (0, 1, 500))
        assert planned_iterations("sqrt", ScaleSchedule.constant(S), 1000) == math.ceil(1000 / S)
    up = ScaleSchedule.from_fractions([[0, 2], [0.5, 8]], 1000)
    assert make_rule("sqrt", up, 1000).factors(3, 8, 1.0) == (math.sqrt(8), 8.0, 1.0)  # S_t, not the first S
    assert METHODS["sqrt"].identity_at_s1 and check_row(METHODS["sqrt"]) is None


def test_legw_is_sqrt_S_with_a_warmup_S_times_the_base_one() -> None:
    """You et al. 2019 (AdaptDL's LEGWScale): lr factor √S · min(1, τ / (S·τ_w)), τ_w the base warm-up."""
    T1 = 1000.0
    tau_w = LEGW_BASE_WARMUP * T1
    for S in (1, 4, 32):
        rule = make_rule("legw", ScaleSchedule.constant(S), T1)
        for t in range(0, 200, 3):
            m, p, w = rule.factors(t, S, 5.0)
            assert (m, p) == (math.sqrt(S), float(S))
            assert w == pytest.approx(min(1.0, S * t / (S * tau_w)))  # τ_t = S·t: the ramp lasts τ_w iterations
    # AdaptDL's own example (tests of scaling_rules.py): base warm-up 10 epochs of 1 000 examples at batch 100, so
    # τ_w = 100; at S = 4 the factor at τ = 8 is √4 · 8 / 400 = 0.04, and √4 = 2 once τ ≥ 400
    rule = LEGW(ScaleSchedule.constant(4), base_warmup=100.0)
    m, _, w = rule.factors(2, 4, 1.0)
    assert m * w == pytest.approx(0.04)
    m, _, w = rule.factors(100, 4, 1.0)
    assert m * w == 2.0
    # elastic: τ is the clock's own (the sum of S_t), the ramp's length the current S_t × τ_w
    up = ScaleSchedule.from_fractions([[0, 2], [0.01, 4], [0.02, 8]], T1)
    rule, tau = make_rule("legw", up, T1), 0.0
    for t in range(40):
        S = up(tau)
        assert rule.factors(t, S, 1.0) == (math.sqrt(S), float(S), pytest.approx(min(1.0, tau / (S * tau_w))))
        tau += S
    # a warm-up at S = 1: not identity scaling there, so it runs its own S = 1 (and claiming otherwise is caught)
    assert not METHODS["legw"].identity_at_s1
    wrong = dataclasses.replace(METHODS["legw"], identity_at_s1=True)
    assert "identity_at_s1 is claimed" in (check_row(wrong) or "")


def test_every_row_builds_a_rule_and_its_s1_claim_holds() -> None:
    for name, row in METHODS.items():
        assert row.name == name and check_row(row) is None, name
        rule = row.build(RuleContext(ScaleSchedule.constant(4), 100.0, 100.0, 100.0))
        assert isinstance(rule, Rule)
    shared = [n for n, r in METHODS.items() if shares_s1(r)]
    assert SHARED_AT_S1 in shared and "legw" not in shared
    assert shared_note() == "shared: " + " = ".join(METHODS[n].label for n in shared) + " at S = 1"
    assert shared_note(["lsw", "legw"]) == "shared: AS = LSW at S = 1"  # LEGW runs its own S = 1

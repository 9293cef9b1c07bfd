"""Learning-rate schedules over τ and the (m_t, p_t, w_t) of each rule."""

from __future__ import annotations

import math

import pytest

from bench.algo.rules import WARMUP_FRACTION, iterations_for, make_rule
from bench.algo.schedules import ScaleSchedule, lr_schedule
from bench.errors import UserError


def test_exponential_and_step_decay() -> None:
    exp = lr_schedule({"kind": "exponential", "lr0": 0.1, "decay": 0.01}, 1000)
    assert exp(0) == pytest.approx(0.1)
    assert exp(500) == pytest.approx(0.1 * 0.1)
    assert exp(1000) == pytest.approx(0.1 * 0.01)
    step = lr_schedule({"kind": "step", "lr0": 1.0, "gamma": 0.1, "milestones": [1 / 3, 2 / 3]}, 900)
    assert [step(t) for t in (0, 299, 300, 599, 600, 899)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    with pytest.raises(UserError, match="lr0"):
        lr_schedule({"kind": "exponential", "decay": 0.1}, 10)
    with pytest.raises(UserError, match="kind"):
        lr_schedule({"kind": "cosine", "lr0": 1}, 10)


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

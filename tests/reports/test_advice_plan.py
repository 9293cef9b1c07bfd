"""advise's verification plan (issue 55.3): the S verified by default (every S asked up to the largest
efficient one, and one past it), the seeds per side from the control's power rule (noninferiority.seeds_for)
on a measured spread, or on an assumed one said so, and the warning when fewer are run."""

from __future__ import annotations

import math

from reports import advice as A
from reports.stats.noninferiority import Margin, seeds_for


def row(S: int, eff_lo: float) -> A.Row:
    return A.Row(S, 100 / S, 90 / S, 110 / S, S * eff_lo, eff_lo, eff_lo, eff_lo, 1.0, False, math.nan)


def probe(sd: float, runs: int) -> A.Probe:
    noise = [("early", 1.0, 0.5, 2.0), ("middle", 2.0, 1.0, 3.0), ("late", 3.0, 2.0, 4.0)]
    return A.Probe("d", 8, 1000, 100.0, 8.0, (), (), [], noise, Margin(0.02, "the card's Δ"), A.Spread(sd, runs, 1))


def test_verify_scales_default_up_to_the_largest_efficient_and_one_past() -> None:
    rows = [row(1, 1.0), row(2, 0.9), row(4, 0.7), row(8, 0.4), row(16, 0.2)]
    assert A.verify_scales(rows, [1, 2, 4, 8, 16]) == [1, 2, 4, 8]
    assert A.verify_scales([row(1, 1.0), row(2, 0.1), row(4, 0.05)], [1, 2, 4]) == [1, 2, 4]


def test_seeds_from_a_measured_spread_are_the_controls_rule_and_fewer_warn() -> None:
    s = A.planned_seeds(probe(0.01, 6))
    assert s.per_side == seeds_for(0.01, 0.02, A.POWER, 0.0, A.MOST_SEEDS) and "measured over 6 runs" in s.why
    assert "Warning" in A.seeds_line(s, s.per_side - 1) and "Warning" not in A.seeds_line(s, s.per_side)


def test_one_probe_seed_states_the_assumed_spread_and_its_source() -> None:
    s = A.planned_seeds(probe(math.nan, 0))
    assert s.sd == 0.02 and "no seed spread measured" in s.why and "sd assumed equal to Δ, the card's margin" in s.why
    assert A.seeds_line(s, 2).count("Δ = ") == 1  # Δ's value said once (issue 55.7: one number per quantity)
    assert probe(math.nan, 0).late_B == 3.0  # the one late B advice.md and the prediction use

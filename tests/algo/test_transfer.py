"""bench.core.algo.transfer: two probes read how the noise a run follows moves with its S, and the prediction at every S
follows it; one probe cannot (the check fails there)."""

from __future__ import annotations

import math

import pytest

from bench.core.algo import transfer
from bench.core.algo.predict import iterations_following

PROFILE = tuple((1.0, 1.0 / 40 * (1 - 0.09 * j)) for j in range(10))  # B/b from 40 rising to 110 over τ
T1 = 2000.0


def world(beta: float, scale: int) -> float:
    """The iterations a run at `scale` takes where the noise it follows is PROFILE's × 2^{β·log2 S}: f(S) = β log2 S."""
    return iterations_following(transfer.scaled(PROFILE, 2.0 ** (beta * math.log2(scale))), scale, T1)


def probes(beta: float, high: int = 128, low: int = 8) -> tuple[list, float]:
    """Both probes' (S, profile) as they would fold in that world, and the slope read from them."""
    at = lambda S: transfer.scaled(PROFILE, 2.0 ** (beta * math.log2(S)))  # noqa: E731
    per_octave = transfer.slope(at(high), high, low, world(beta, low), T1)
    return [(high, at(high)), (low, at(low))], per_octave


@pytest.mark.parametrize("beta", [0.0, 0.15, 0.3])
def test_two_probes_read_the_slope_and_predict_every_scale(beta: float) -> None:
    """The slope read between the probes is the world's (in log c per octave: β·ln 2), and the prediction at every S
    from 2 to 256 meets the world's count within 1 % (its integer steps)."""
    both, per_octave = probes(beta)
    assert per_octave == pytest.approx(beta * math.log(2), abs=0.01)
    for S in (2, 4, 16, 32, 64, 256):
        truth = world(beta, S)
        assert transfer.iterations_from(both, per_octave, S, T1) == pytest.approx(truth, rel=0.01), S


def test_one_probe_misses_where_the_noise_moves_with_s() -> None:
    """The check can fail: from the high probe alone (no slope) the same world's counts below it are all too few,
    by more than 4 % where the count depends on the noise (S·b near B) — the one-signed miss issue 54 measured on the
    user's nets — where the two probes meet them within 1 %."""
    both, per_octave = probes(0.3)
    misses = [transfer.iterations_from(both[:1], 0.0, S, T1) / world(0.3, S) - 1 for S in (4, 8, 16, 32)]
    assert all(m < 0 for m in misses) and min(misses) < -0.04, misses
    two = [transfer.iterations_from(both, per_octave, S, T1) / world(0.3, S) - 1 for S in (4, 8, 16, 32)]
    assert max(map(abs, two)) <= 0.01, two


def test_the_nearer_probe_and_the_low_scale() -> None:
    assert transfer.nearest([128, 8], 32) == 0  # two octaves from each: the larger S
    assert transfer.nearest([128, 8], 16) == 1 and transfer.nearest([128, 8], 2) == 1
    assert transfer.nearest([128, 8], 256) == 0
    assert [transfer.low_scale(s) for s in (128, 64, 16, 8, 3, 2)] == [8, 4, 2, 2, 2, None]


def test_no_slope_without_a_second_count() -> None:
    """A low probe with no count (NaN, 0) or at the high one's S gives slope 0: the high probe's profile as it is."""
    assert transfer.slope(PROFILE, 64, 4, math.nan, T1) == 0.0
    assert transfer.slope(PROFILE, 64, 4, 0.0, T1) == 0.0
    assert transfer.slope(PROFILE, 64, 64, 100.0, T1) == 0.0
    assert transfer.iterations_from([(64, PROFILE)], 0.0, 16, T1) == iterations_following(PROFILE, 16, T1)


def test_a_pair_is_its_probes_and_slope_read_once() -> None:
    """transfer.Pair predicts as iterations_from does with the slope its probes give; a low profile left out keeps
    the slope (it reads the low count), a high one reads it again; one probe has slope 0 and predicts from itself."""
    (high, fh), (low, fl) = probes(0.15)[0]
    pair = transfer.Pair(fh, high, T1, fl, low, world(0.15, low))
    assert pair.per_octave == transfer.slope(fh, high, low, world(0.15, low), T1) > 0
    for S in (2, 8, 32, 128, 256):
        assert pair.iterations(S) == transfer.iterations_from(pair.anchors, pair.per_octave, S, T1)
    flat = transfer.scaled(fh, 0.5)
    assert pair.with_low(flat).per_octave == pair.per_octave and pair.with_low(flat).low == flat
    assert pair.with_high(flat).per_octave == transfer.slope(flat, high, low, world(0.15, low), T1) != pair.per_octave
    one = transfer.Pair(fh, high, T1)
    assert one.per_octave == 0.0 and one.iterations(16) == iterations_following(fh, 16, T1)

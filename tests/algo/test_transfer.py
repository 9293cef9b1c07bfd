"""bench.core.algo.transfer: probes at two S read how the noise a run follows moves with its S, and the prediction at
every S follows it; one probe cannot (the check fails there); where it bends, a middle probe follows what two cannot."""

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


def probes(beta: float, high: int = 128, low: int = 8) -> transfer.Chain:
    """Both probes as they would fold in that world (profiles and counts), their slope read."""
    at = lambda S: transfer.scaled(PROFILE, 2.0 ** (beta * math.log2(S)))  # noqa: E731
    return transfer.Chain(
        (transfer.Anchor(high, at(high), world(beta, high)), transfer.Anchor(low, at(low), world(beta, low))), T1
    )


@pytest.mark.parametrize("beta", [0.0, 0.15, 0.3])
def test_two_probes_read_the_slope_and_predict_every_scale(beta: float) -> None:
    """The slope read between the probes is the world's (in log c per octave: β·ln 2), and the prediction at every S
    from 2 to 256 meets the world's count within 1 % (its integer steps)."""
    both = probes(beta)
    assert both.per_octave == pytest.approx(beta * math.log(2), abs=0.01)
    for S in (2, 4, 16, 32, 64, 256):
        assert both.iterations(S) == pytest.approx(world(beta, S), rel=0.01), S


def test_one_probe_misses_where_the_noise_moves_with_s() -> None:
    """The check can fail: from the high probe alone (no slope) the same world's counts below it are all too few,
    by more than 4 % where the count depends on the noise (S·b near B) — the one-signed miss issue 54 measured on the
    user's nets — where the two probes meet them within 1 %."""
    both = probes(0.3)
    one = transfer.Chain(both.anchors[:1], T1)
    misses = [one.iterations(S) / world(0.3, S) - 1 for S in (4, 8, 16, 32)]
    assert all(m < 0 for m in misses) and min(misses) < -0.04, misses
    two = [both.iterations(S) / world(0.3, S) - 1 for S in (4, 8, 16, 32)]
    assert max(map(abs, two)) <= 0.01, two


def test_the_nearer_probe_and_the_probes_scales() -> None:
    assert transfer.nearest([128, 8], 32) == 0  # two octaves from each: the larger S
    assert transfer.nearest([128, 8], 16) == 1 and transfer.nearest([128, 8], 2) == 1
    assert transfer.nearest([128, 8], 256) == 0
    assert transfer.probe_scales(128) == (128, 32, 8) and transfer.probe_scales(64) == (64, 16, 4)
    assert transfer.probe_scales(32) == (32, 8, 2) and transfer.probe_scales(16) == (16, 4, 2)
    assert [transfer.probe_scales(s) for s in (8, 3, 2)] == [(8, 2), (3, 2), (2,)]  # under 3 octaves: no middle
    assert transfer.probe_scales(100) == (100, 32, 6) and transfer.middle_scales(128, 32) == ()


def test_no_slope_without_a_second_count() -> None:
    """A low probe with no count (NaN, 0) or at the high one's S gives slope 0: the high probe's profile as it is."""
    assert transfer.slope(PROFILE, 64, 4, math.nan, T1) == 0.0
    assert transfer.slope(PROFILE, 64, 4, 0.0, T1) == 0.0
    assert transfer.slope(PROFILE, 64, 64, 100.0, T1) == 0.0
    assert transfer.Chain((transfer.Anchor(64, PROFILE),), T1).iterations(16) == iterations_following(PROFILE, 16, T1)


NOISY = transfer.scaled(PROFILE, 0.1)  # B/b from 4 to 11: past S ≈ 16 the count depends on the noise, as on the nets


def bent(scale: int) -> float:
    """log2 c of a world whose f bends as the user's CNN's did (docs/design.md §4): its slope falls from 0.3 per
    octave at S = 2 to 0.12 at S = 128."""
    octaves = math.log2(scale)
    return 0.33 * octaves - 0.015 * octaves**2


def bent_world(scale: int) -> float:
    return iterations_following(transfer.scaled(NOISY, 2.0 ** bent(scale)), scale, T1)


def chain_of(scales: tuple[int, ...], world=bent_world, f=bent) -> transfer.Chain:  # noqa: ANN001
    """The probes at `scales` as they would fold in a world (their profiles and counts)."""
    anchors = (transfer.Anchor(s, transfer.scaled(NOISY, 2.0 ** f(s)), world(s)) for s in scales)
    return transfer.Chain(tuple(anchors), T1)


def test_a_middle_probe_follows_the_bend_two_probes_miss() -> None:
    """Where f bends, the line between two probes (S = 128 and 8) misses the counts between them by > 2 % (too many
    iterations: the sign the user's CNN showed), and the chain with the middle probe meets every S from 2 to 64 within
    1 %; where f is straight both meet it (the middle probe costs nothing in accuracy)."""
    two, three = chain_of((128, 8)), chain_of((128, 32, 8))
    assert all(two.iterations(S) / bent_world(S) - 1 > 0.02 for S in (32, 64))
    for S in (2, 4, 16, 32, 64):
        assert three.iterations(S) == pytest.approx(bent_world(S), rel=0.01), S
    line = lambda S: 0.2 * math.log2(S)  # noqa: E731
    straight = lambda S: iterations_following(transfer.scaled(NOISY, 2.0 ** line(S)), S, T1)  # noqa: E731
    for S in (4, 16, 32, 64):
        for scales in ((128, 8), (128, 32, 8)):
            assert chain_of(scales, straight, line).iterations(S) == pytest.approx(straight(S), rel=0.01), (S, scales)


def test_a_chain_reads_each_segment_once_and_a_left_out_profile_its_own() -> None:
    """Each segment's slope is the higher probe's profile meeting the lower one's count; at a probe's S the chain
    predicts from that probe alone; a profile left out (the jackknife) reads the segment below it again and keeps the
    one above (which reads its count); two anchors are the former pair: the line between them."""
    chain = chain_of((128, 32, 8))
    (hi, mid, lo) = chain.anchors
    assert chain.slopes == (
        transfer.slope(hi.profile, 128, 32, mid.count, T1),
        transfer.slope(mid.profile, 32, 8, lo.count, T1),
    )
    for a in chain.anchors:
        assert chain.iterations(a.scale) == iterations_following(a.profile, a.scale, T1)
    flat = transfer.scaled(mid.profile, 0.5)
    out = chain.with_profile(1, flat)
    assert out.slopes[0] == chain.slopes[0] and out.slopes[1] == transfer.slope(flat, 32, 8, lo.count, T1)
    assert out.slopes[1] != chain.slopes[1] and out.anchors[1].profile == flat
    assert chain.with_profile(2, flat).slopes == chain.slopes
    pair = chain_of((128, 8))
    assert pair.per_octave == pair.slopes[0] and chain.per_octave == pytest.approx(sum(chain.slopes) / 2)
    with pytest.raises(ValueError, match="high to low"):
        transfer.Chain((lo, hi), T1)
    unknown = transfer.Chain((hi, transfer.Anchor(32, tuple((math.nan, math.nan) for _ in NOISY), 100.0), lo), T1)
    assert math.isnan(unknown.iterations(64)) and math.isnan(unknown.iterations(16))  # no count: NaN, not a log error
    with pytest.raises(ValueError, match="has 2 slopes, not 1"):
        transfer.Chain(chain.anchors, T1, (0.1,))

"""reports.stats.noise's array forms of bench.core.algo.gain's b_simple_average and b_simple give the same bits (the
report's tables print B_simple from them, and must not change with the speed-up)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from bench.core.algo.gain import b_simple, b_simple_average
from reports.stats.noise import b_simple_average_of, b_simple_of


def bits(x: float) -> bytes:
    return struct.pack("<d", float(x))


@pytest.mark.parametrize("seed", range(20))
def test_the_average_over_arrays_is_the_loop_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    sum_sq = rng.gamma(2, 1, n) * rng.choice([1e-8, 1, 1e6], n)
    mean_sq = rng.gamma(2, 0.1, n) * rng.choice([1e-8, 1, 1e3], n)
    scale = rng.choice([1, 2, 3, 8, 64, 1000], n)
    sum_sq[rng.random(n) < 0.01] = np.nan
    mean_sq[rng.random(n) < 0.01] = np.inf
    batch = float(rng.choice([32, 128, 2048]))
    want = b_simple_average(zip(sum_sq.tolist(), mean_sq.tolist(), scale.tolist(), strict=True), batch)
    got = b_simple_average_of(sum_sq, mean_sq, scale, batch)
    assert bits(got) == bits(want)


def test_no_records_with_statistics_is_nan() -> None:
    assert math.isnan(b_simple_average_of(np.array([1.0]), np.array([1.0]), [1], 32))
    assert math.isnan(b_simple_average(zip([1.0], [1.0], [1], strict=True), 32))


def test_b_simple_over_arrays_is_b_simple_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, -1.0, 1.0, 1e-300, -1e-300, np.inf, -np.inf, np.nan, 5e-324]
    var = np.concatenate([rng.normal(0, 1, 2000), special * len(special)])
    sqr = np.concatenate([rng.normal(0, 1, 2000), np.repeat(special, len(special))])
    got = b_simple_of(var, sqr, 128.0)
    want = [b_simple(v, q, 128.0) for v, q in zip(var.tolist(), sqr.tolist(), strict=True)]
    assert [bits(x) for x in got] == [bits(x) for x in want]

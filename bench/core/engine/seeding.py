"""Deterministic seeds derived from integers, so randomness is a function of position, not history."""

from __future__ import annotations

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def mix(*values: int) -> int:
    """Hash integers into one 63-bit seed (splitmix64 over the values)."""
    h = _GOLDEN
    for v in values:
        h = (h ^ (int(v) & _MASK)) & _MASK
        h = (h + _GOLDEN) & _MASK
        z = h
        z = ((z ^ (z >> 30)) * _M1) & _MASK
        z = ((z ^ (z >> 27)) * _M2) & _MASK
        h = z ^ (z >> 31)
    return h >> 1


def mix_array(*values: int | np.ndarray) -> np.ndarray:
    """`mix` element-wise over integer arrays (broadcast with scalars): the same values, computed with
    numpy's wrapping uint64 arithmetic instead of one Python call per element (the data stream keys
    every example of every micro-batch)."""
    with np.errstate(over="ignore"):
        h = np.full((), _GOLDEN, dtype=np.uint64)
        for v in values:
            if isinstance(v, np.ndarray):
                u = v.astype(np.int64, copy=False).view(np.uint64)  # two's complement: int(v) & _MASK
            else:
                u = np.uint64(int(v) & _MASK)
            h = (h ^ u) + np.uint64(_GOLDEN)
            z = (h ^ (h >> np.uint64(30))) * np.uint64(_M1)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
            h = z ^ (z >> np.uint64(31))
        return np.atleast_1d(h >> np.uint64(1)).astype(np.int64)

"""Deterministic seeds derived from integers, so randomness is a function of position, not history."""

_MASK = (1 << 64) - 1


def mix(*values: int) -> int:
    """Hash integers into one 63-bit seed (splitmix64 over the values)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (int(v) & _MASK)) & _MASK
        h = (h + 0x9E3779B97F4A7C15) & _MASK
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        h = z ^ (z >> 31)
    return h >> 1

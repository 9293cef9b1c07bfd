"""argparse types for numbers with a lower bound: one place, so every command words the error alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _bounded(convert: Callable[[str], float], ok: Callable[[float], bool], what: str) -> Callable[[str], float]:
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


positive_int = _bounded(int, lambda v: v >= 1, "a positive integer")
non_negative_int = _bounded(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _bounded(float, lambda v: v > 0, "a positive number")

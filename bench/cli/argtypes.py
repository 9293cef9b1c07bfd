"""argparse types for numbers with a lower bound: one place, so every command words the error alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from bench.core.runspec import MAX_SCALE


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
# a seed is handed to torch and numpy as an int64 (bench.core.runspec.INT64_MAX)
seed = _bounded(int, lambda v: 0 <= v < 2**63, "an integer in [0, 2**63)")
scale_int = _bounded(int, lambda v: 1 <= v <= MAX_SCALE, f"an integer in [1, {MAX_SCALE}]")  # S, W: the schema's
scale_int0 = _bounded(int, lambda v: 0 <= v <= MAX_SCALE, f"an integer in [0, {MAX_SCALE}]")  # an S, or 0: none
MAX_SEEDS = 1000  # seeds per cell: a verification of 1000 x 1000 runs is past any queue; 10**8 filled the memory
seed_count = _bounded(int, lambda v: 1 <= v <= MAX_SEEDS, f"an integer in [1, {MAX_SEEDS}]")
MAX_PROBE_SEEDS = 16  # advise's seeds per probe: each one a run at the largest S asked
probe_seeds = _bounded(int, lambda v: 1 <= v <= MAX_PROBE_SEEDS, f"an integer in [1, {MAX_PROBE_SEEDS}]")
positive_float = _bounded(float, lambda v: v > 0, "a positive number")

MAX_WATCH_S = 86400.0  # `status --watch N`: at most a day between refreshes (inf would sleep for ever)
watch_seconds = _bounded(float, lambda v: 0 < v <= MAX_WATCH_S, f"a number of seconds in (0, {MAX_WATCH_S:g}]")
MAX_BATCHES = 1_000_000  # `gain --batches`: 1000× the paper's 1000 micro-batches per checkpoint
batches = _bounded(int, lambda v: 1 <= v <= MAX_BATCHES, f"an integer in [1, {MAX_BATCHES}]")


def task_help() -> str:
    from tasks import available

    return (
        f"one of {', '.join(available())}, or a task of yours as package.module:NAME (docs/design.md, Your own model)"
    )


def task_name(text: str) -> str:
    """A built-in task present here, or a task of yours (`package.module:NAME`, imported where it is used)."""
    from bench.core.usercode import USER_NAME
    from tasks import available, unknown_task

    if text in available() or USER_NAME.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(unknown_task(text))


MAX_SHARPNESS_POINTS = 100  # `advise --sharpness-points`: kept checkpoints measured (each ~20 Hessian products)
sharpness_points = _bounded(int, lambda v: 0 <= v <= MAX_SHARPNESS_POINTS, f"an integer in [0, {MAX_SHARPNESS_POINTS}]")
MAX_SHARPNESS_EXAMPLES = 10_000_000  # `advise --sharpness-examples`: items in the sample (two halves of ≥ 1)
sharpness_examples = _bounded(
    int, lambda v: 2 <= v <= MAX_SHARPNESS_EXAMPLES, f"an integer in [2, {MAX_SHARPNESS_EXAMPLES}]"
)

"""A progress line every N seconds when stdout is not a terminal (a SLURM job's log, a pipe, a file).

On a terminal the engine shows tqdm's bar; in a job log a bar is either nothing (tqdm turns itself off
when its stream is not a terminal) or thousands of carriage returns, and a run would say nothing until it
ends. So rank 0 prints one plain line every `heartbeat_s` seconds (a run setting, not part of the run's
identity; 0 turns it off):

    heartbeat cifar10 adascale s4 seed0: iteration 120, τ 480/2000 (24.0%), S 4, loss 1.234, gain 3.12,
    lr 0.1, 3.41 it/s, ETA 0:07:30

Everything in it is already on the host: the iteration's loss, gain and lr come from its one transfer
(bench.core.engine.accumulate), τ and the iteration count from the loop's state, and time from the
host's clock. The rates are over the interval since the previous line; the ETA divides the τ still to go
by τ's rate over that interval, so it follows the gain (AdaScale's τ advances by r_t per iteration).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TextIO

from bench.core.runspec import RunSpec

MAX_ETA_S = 1000 * 86400


class Heartbeat:
    """Prints a line at most every `every` seconds, when `beat` is called (after each iteration)."""

    def __init__(
        self,
        every: float,
        label: str,
        total: float,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every, self.label, self.total = float(every), label, float(total)
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self._last: tuple[float, int, float] | None = None  # (time, iteration, τ) at the previous line

    @classmethod
    def for_run(cls, spec: RunSpec, is_main: bool, stream: TextIO | None = None) -> Heartbeat | None:
        """The run's heartbeat: on rank 0, when `heartbeat_s` > 0 and the stream (stdout) is not a terminal."""
        every = spec.heartbeat_s
        stream = stream if stream is not None else sys.stdout
        if not is_main or not every or _is_terminal(stream):
            return None
        label = f"{spec.task} {spec.method} {_scale(spec.scale)} seed{spec.seed}"
        return cls(float(every), label, float(spec.T1), stream)

    def start(self, iteration: int, tau: float) -> None:
        """Where the interval of the first line starts (the run's start, or its resume)."""
        self._last = (self.clock(), iteration, tau)

    def beat(self, iteration: int, tau: float, scale: int, loss: float, gain: float, lr: float) -> bool:
        """Print a line if `every` seconds have passed since the last one; True if it did."""
        now = self.clock()
        if self._last is None:
            self._last = (now, iteration, tau)
            return False
        then, it0, tau0 = self._last
        elapsed = now - then
        if elapsed < self.every:
            return False
        self._last = (now, iteration, tau)
        rate = (iteration - it0) / elapsed if elapsed > 0 else 0.0
        tau_rate = (tau - tau0) / elapsed if elapsed > 0 else 0.0
        left = max(self.total - tau, 0.0)
        seconds = left / tau_rate if tau_rate > 0 else math.inf
        # a T_AS of 1e20 is an ETA past what timedelta holds: said, not an OverflowError that fails the run
        eta = (
            str(timedelta(seconds=round(seconds)))
            if seconds < MAX_ETA_S
            else "unknown"
            if tau_rate <= 0
            else ">1000 days"
        )
        share = min(tau / self.total, 1.0) if self.total > 0 else 0.0
        line = (
            f"heartbeat {self.label}: iteration {iteration}, τ {tau:.0f}/{self.total:.0f} ({share:.1%}), S {scale}, "
            f"loss {loss:.4g}, gain {gain:.3g}, lr {lr:.3g}, {rate:.3g} it/s, ETA {eta}"
        )
        print(line, file=self.stream, flush=True)
        return True


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _scale(scale: Any) -> str:
    return f"s{scale}" if isinstance(scale, int) else str(scale)


def progress_bar(spec: RunSpec, T1: float, tau: float, enabled: bool) -> Any:
    """The progress bar over τ of a run (on a terminal, when `enabled`: rank 0 and asked for)."""
    from tqdm import tqdm

    return tqdm(
        total=T1,
        initial=min(tau, T1),
        unit="τ",
        dynamic_ncols=True,
        disable=not enabled or None,
        leave=False,
        desc=f"{spec.task} {spec.method} {spec.scale} seed{spec.seed}",
        bar_format="{desc}: {percentage:3.0f}%|{bar}| τ {n:.0f}/{total:.0f} [{elapsed}<{remaining}{postfix}]",
    )

"""Stopping a run cleanly: SIGTERM and SIGUSR2 (SLURM's and submitit's preemption signals) ask the engine
to checkpoint at the end of the current iteration and raise Interrupted."""

from __future__ import annotations

import signal
from typing import Any

_stop_signal: int | None = None


class Interrupted(Exception):
    """The run was asked to stop (SIGTERM / SIGUSR2) and has checkpointed; run it again to resume."""


class RanksChange(Interrupted):
    """The S schedule now needs `ranks` data-parallel ranks (spec `accumulation` fixes A, so W = S / A):
    the run has checkpointed; start it again with that many ranks (bench.run.launch does it locally, the
    SLURM job resubmits itself)."""

    def __init__(self, ranks: int, message: str) -> None:
        super().__init__(message)
        self.ranks = ranks

    def __reduce__(self) -> tuple[Any, ...]:  # pickled across processes (the experiments' worker pool)
        return (RanksChange, (self.ranks, str(self)))


def request_stop(signum: int, _frame: Any = None) -> None:
    global _stop_signal
    _stop_signal = signum


def install_signal_handlers() -> None:
    """SIGTERM and SIGUSR2 checkpoint at the end of the current iteration and stop."""
    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, request_stop)


def stop_requested() -> bool:
    return _stop_signal is not None


def clear_stop() -> None:
    global _stop_signal
    _stop_signal = None

"""Stopping a run cleanly: SIGTERM and SIGUSR2 (SLURM's and submitit's preemption signals) ask the engine
to checkpoint and raise Interrupted: at one rank (W = 1) before its next micro-batch, the iteration under way
dropped (Abandoned: at a huge S one iteration may never end); at W > 1 at the end of the iteration, which every
rank's vote on the iteration's one gather agrees on (docs/design.md, "Stopping")."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

_stop_signal: int | None = None


class Interrupted(Exception):
    """The run was asked to stop (SIGTERM / SIGUSR2) and has checkpointed; run it again to resume."""


class Abandoned(Interrupted):
    """A stop signal arrived between two micro-batches of an iteration at W = 1: nothing of the iteration is
    applied (no step, no record, no clock moved, the BatchNorm buffers restored), so the run checkpoints where
    the iteration began and a resume computes it whole, bit for bit as an uninterrupted run."""


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
    """SIGTERM and SIGUSR2 checkpoint and stop: before the next micro-batch (W = 1) or at the iteration's end."""
    for sig in (signal.SIGTERM, signal.SIGUSR2):
        signal.signal(sig, request_stop)


def stop_requested() -> bool:
    return _stop_signal is not None


def clear_stop() -> None:
    global _stop_signal
    _stop_signal = None


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """In a pool's worker (forked or spawned): be SIGKILLed when `parent` dies (prctl PR_SET_PDEATHSIG on
    Linux, else a thread watching the parent id), and exit at once if it is gone already. A worker waiting on
    its call queue never sees its parent's SIGKILL otherwise: it (and multiprocessing's resource tracker,
    which waits for every holder of its pipe) would wait for ever. The pools start their workers from the
    thread that lives as long as the pool (the parent's main thread)."""
    if not (sys.platform.startswith("linux") and _prctl_deathsig()):
        threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


def _prctl_deathsig() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)

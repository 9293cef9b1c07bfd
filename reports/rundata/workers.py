"""The report's worker processes (the metrics cache's and the figures'), which die with the report.

A forked ProcessPoolExecutor worker waits on its call queue, a pipe whose both ends it inherited: when
the report is SIGKILLed (no atexit, no shutdown) nothing ever closes the writing end, and the workers
wait forever, holding memory and the results folder. Each worker therefore asks the kernel to SIGKILL it
when its parent dies (prctl PR_SET_PDEATHSIG on Linux, through ctypes; elsewhere a thread that watches
the parent id), and exits at once if the parent is already gone by the time it asks
(bench.core.engine.signals.die_with_parent, which submit's and the matrix's spawn pools use too).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from bench.core.engine.signals import die_with_parent  # the one home: every pool the CLI starts uses it

__all__ = ["WORKERS", "die_with_parent", "pool"]

WORKERS = min(2, os.cpu_count() or 1)  # the report's processes: the metrics scan, the predictions, the figures


def pool(workers: int) -> ProcessPoolExecutor:
    """A forked pool of `workers` processes that die with this one."""
    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=die_with_parent, initargs=(os.getpid(),)
    )

"""The report's worker processes (the metrics cache's and the figures'), which die with the report.

A forked ProcessPoolExecutor worker waits on its call queue, a pipe whose both ends it inherited: when
the report is SIGKILLed (no atexit, no shutdown) nothing ever closes the writing end, and the workers
wait forever, holding memory and the results folder. Each worker therefore asks the kernel to SIGKILL it
when its parent dies (prctl PR_SET_PDEATHSIG on Linux, through ctypes; elsewhere a thread that watches
the parent id), and exits at once if the parent is already gone by the time it asks.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def pool(workers: int) -> ProcessPoolExecutor:
    """A forked pool of `workers` processes that die with this one."""
    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("fork"), initializer=die_with_parent, initargs=(os.getpid(),)
    )


def die_with_parent(parent: int) -> None:
    """In a forked child: be killed when `parent` dies (the thread that forked it, which is the parent's
    main thread here: the pools are started from it)."""
    if sys.platform.startswith("linux") and _prctl_deathsig():
        pass
    else:
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

"""How many runs go at once on this machine when the user does not say (no torch: the CLI's parser reads it)."""

from __future__ import annotations

import os


def default_slots() -> int:
    """Tiny runs use one torch thread each, so one run per usable core, at most 8 (a worker process holds a
    few hundred MB). The smoke's pool and the local executor of `submit` both use it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores))

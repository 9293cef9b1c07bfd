"""Keep freed memory in the process instead of handing it back to the OS after every iteration.

PyTorch's CPU tensors come from malloc. glibc serves blocks above a threshold (128 KiB, then adapted)
with a fresh mmap and returns them with munmap on free, and trims the top of its heap when more than
128 KiB is free there; so every iteration's gradients and activations come back as new pages, and
each page costs a fault and a zeroing: about 3000 faults an iteration on the tiny ResNets, 5–10 % of
their time on a CPU, and a different share for every variant of `adascale-bench perf` (noise in its
ratios). Raising both thresholds keeps the pages mapped and reused: the process holds its peak, which
it needs again next iteration anyway. PyTorch's tuning guide gets the same effect by preloading
jemalloc or tcmalloc; this needs nothing installed. Not glibc (musl, macOS): nothing changes.

The one exception is profiling (`large_blocks_returned`): for its span, large blocks are mmap-ed again,
and the process's own setting comes back after it. glibc has no getter for these thresholds, so this
module is their one writer and knows what the process had.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
from collections.abc import Callable, Iterator

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value: larger blocks are still mmap-ed
TRIM_THRESHOLD = 1 << 30
DEFAULT_MMAP_THRESHOLD = 128 << 10  # glibc's starting value
_retained = False  # whether this process asked for retain_freed_memory


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return None
    if mallopt is not None:
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt


def retain_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process; False where there is no mallopt."""
    global _retained
    mallopt = _mallopt()
    if mallopt is None:
        return False
    _retained = True
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@contextlib.contextmanager
def large_blocks_returned() -> Iterator[None]:
    """For the span of a `with`, serve blocks of 128 KiB and more with mmap, so they go back to the system
    when freed; afterwards the process's own setting again (retained, or glibc's starting value).

    Why: under torch.profiler the profiler's small event records land between the large per-time-step
    buffers of a recurrent backward and the heap cannot reuse the freed space: measured on 2 cores, one
    1024-unit bidirectional LSTM layer over 50 frames grew by 1.75 GB under the profiler (by 0.1 GB with
    this), speech's paper DS2 by over 20 GB in one iteration. Leaving the setting behind would hand every
    later iteration of the same process fresh pages."""
    mallopt = _mallopt()
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD)
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD if _retained else DEFAULT_MMAP_THRESHOLD)

"""Keep freed memory in the process instead of handing it back to the OS after every iteration.

PyTorch's CPU tensors come from malloc. glibc serves blocks above a threshold (128 KiB, then adapted)
with a fresh mmap and returns them with munmap on free, and trims the top of its heap when more than
128 KiB is free there; so every iteration's gradients and activations come back as new pages, and
each page costs a fault and a zeroing: about 3000 faults an iteration on the tiny ResNets, 5–10 % of
their time on a CPU, and a different share for every variant of `adascale-bench perf` (noise in its
ratios). Raising both thresholds keeps the pages mapped and reused: the process holds its peak, which
it needs again next iteration anyway. PyTorch's tuning guide gets the same effect by preloading
jemalloc or tcmalloc; this needs nothing installed. Not glibc (musl, macOS): nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value: larger blocks are still mmap-ed
TRIM_THRESHOLD = 1 << 30


@functools.cache
def retain_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); False where there is no mallopt."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return False
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

"""Large allocations returned to the system when freed: glibc's mmap threshold fixed at 1 MiB.

glibc serves an allocation above its mmap threshold (128 KiB at start) with
a mapping of its own, returned to the system when freed; but each time such a
block is freed it raises the threshold to that block's size (up to 32 MiB),
so later large blocks come from the heap, whose freed memory mostly stays
with the process. A flood of large requests and replies then leaves the
worker hundreds of MiB larger for good. Measured (``benchmarks.hostile
unread``: 60 clients, a 2.3 MB filter naming 100,000 unknown nodes each, the
6.6 MB replies never read): peak RSS 292 MiB over idle with glibc's dynamic
threshold, 82 MiB with it fixed at 1 MiB (and 78 at 128 KiB, which would map
and fault in every ordinary 200 KB request body as well). ``mallopt`` fixes
it (and turns the dynamic adjustment off); elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 1 << 20


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Set glibc's mmap threshold to ``size``; False where there is no glibc ``mallopt``."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, size) == 1

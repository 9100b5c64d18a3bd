"""glibc's heap on long CPU training runs: large blocks go back to the system when freed.

A training iteration on a CPU allocates and frees activation, gradient and cache tensors of
many sizes. glibc serves a block below its mmap threshold from its heap; the threshold starts at
128 KiB and rises (up to 32 MiB) each time a larger mmapped block is freed, so that after the
first update almost every activation tensor lives in the heap. A heap with free holes between
live blocks cannot shrink, and the process's resident memory grows from one phase to the next
(``python -m benchmarks.update_memory --updates 2 --settings on,2048,glibc on,2048,mmap``
measures it: SmolLM2-135M's update peaks at 4.29 GB with glibc's defaults, 3.35 GB with a fixed
1 MiB threshold). Fixed at 1 MiB, the threshold keeps every activation tensor of a micro-batch
(megabytes each) out of the heap, while the many small blocks stay there, where they are cheap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 1 << 20


def return_freed_memory(threshold: int = THRESHOLD) -> bool:
    """Have glibc serve every allocation of ``threshold`` bytes or more by mmap, so that freeing
    it returns its memory to the system. Returns whether the setting took effect: not on a
    system without glibc, nor where ``MALLOC_MMAP_THRESHOLD_`` is set (the user's choice wins)."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, int(threshold)) == 1

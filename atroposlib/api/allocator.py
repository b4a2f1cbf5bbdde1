"""Let the API process reuse its freed MB-sized buffers instead of faulting in fresh memory (glibc).

The server churns through MB-sized buffers: request bodies, the payloads read for a batch. With
glibc's defaults such buffers are mmap'd and unmapped, or the heap is trimmed once they are freed,
so every request faults fresh pages in from the kernel (~0.5 ms per MB on small virtual machines,
as much as writing the payload). ``keep_freed_memory()`` raises the mmap and trim thresholds so
that freed memory is reused; the process then keeps up to ``trim_mb`` of free heap. It is a no-op
(returns False) where ``mallopt`` is not available (musl, macOS, Windows).
"""

from __future__ import annotations

import ctypes
import logging

logger = logging.getLogger("atroposlib.api")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX_MB = 32  # glibc's upper bound for M_MMAP_THRESHOLD on 64-bit


def keep_freed_memory(mmap_threshold_mb: int = _MMAP_THRESHOLD_MAX_MB, trim_mb: int = 256) -> bool:
    """Serve allocations below ``mmap_threshold_mb`` from the heap and keep up to ``trim_mb`` of
    freed heap in the process; True when the C library took both settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok: bool = mallopt(_M_MMAP_THRESHOLD, mmap_threshold_mb << 20) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, trim_mb << 20) == 1 and ok
    if not ok:
        logger.debug("mallopt refused the allocator settings; using the C library's defaults")
    return ok


__all__ = ["keep_freed_memory"]

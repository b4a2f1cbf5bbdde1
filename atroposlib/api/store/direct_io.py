"""Large payload I/O that bypasses the page cache (``O_DIRECT``), for the SQLite store's segments.

A buffered ``pwrite`` of a 1 MB group makes the kernel allocate and fill 256 fresh page-cache
pages; on small (virtual) machines that costs 1-2.5 ms of CPU per group, as much as validating it.
With ``O_DIRECT`` the bytes go from an aligned user buffer to the device (~0.1 ms of CPU), and a
large read comes back the same way. ``O_DIRECT`` needs the file offset, the length and the buffer
aligned to the block size: payloads start on a 4 KiB boundary and are zero-padded to a multiple of
it (the row keeps the true length and crc32). Where the filesystem refuses ``O_DIRECT`` (tmpfs, some
network filesystems) or the platform lacks it, the store uses buffered I/O as before.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from pathlib import Path
from typing import Optional

ALIGN = 4096
# Payloads at least this large use direct I/O; small ones are cheaper through the page cache.
DIRECT_MIN_BYTES = 64 * 1024
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def padded(n: int) -> int:
    """``n`` rounded up to the alignment."""
    return -(-n // ALIGN) * ALIGN


def open_direct(path: Path, flags: int) -> Optional[int]:
    """A file descriptor of ``path`` with ``O_DIRECT``, or None where that is not supported."""
    if not _O_DIRECT:
        return None
    try:
        return os.open(path, flags | _O_DIRECT, 0o644)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise


class AlignedBuffers:
    """One reusable page-aligned buffer per thread (anonymous mmap), grown on demand; reusing it
    avoids faulting in fresh memory for every payload."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, size: int) -> mmap.mmap:
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < size:
            if buf is not None:
                buf.close()
            buf = mmap.mmap(-1, padded(max(size, 1 << 20)))
            self._local.buf = buf
        return buf


def write_direct(fd: int, blob: bytes, offset: int, buffers: AlignedBuffers) -> None:
    """Write ``blob`` zero-padded to the alignment at ``offset`` (aligned) through ``fd``."""
    size = padded(len(blob))
    buf = buffers.get(size)
    buf[: len(blob)] = blob
    if size > len(blob):
        buf[len(blob) : size] = bytes(size - len(blob))
    with memoryview(buf) as whole:
        view = whole[:size]
        try:
            done = 0
            while done < size:
                written = os.pwrite(fd, view[done:], offset + done)
                if written <= 0 or written % ALIGN:
                    raise OSError(errno.EIO, f"short direct write ({written} bytes)")
                done += written
        finally:
            view.release()


def read_direct(fd: int, offset: int, length: int, buffers: AlignedBuffers) -> bytes:
    """Read ``length`` bytes at ``offset`` (aligned) through ``fd``; shorter if the file ends."""
    size = padded(length)
    buf = buffers.get(size)
    with memoryview(buf) as whole:
        view = whole[:size]
        try:
            got = os.preadv(fd, [view], offset)
        finally:
            view.release()
    return buf[: min(got, length)]


__all__ = [
    "ALIGN",
    "DIRECT_MIN_BYTES",
    "AlignedBuffers",
    "open_direct",
    "padded",
    "read_direct",
    "write_direct",
]

"""Append-only payload segment files of the SQLite store (``blobs/NNNNNNNN.seg``).

A payload is written with ``write`` *before* the SQLite transaction that references it commits, and
is addressed by (segment, offset, length, crc32); ``read`` checks the crc so bytes lost in a power
failure are detected, never returned. Payloads of ``DIRECT_MIN_BYTES`` and more go through
``O_DIRECT`` where the filesystem allows it (see ``direct_io``), else through the page cache.
Which segments are still referenced is the index's business (``SqliteStore``); this class only
writes, reads, and drops whole segment files.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import zlib
from pathlib import Path
from typing import Optional

from atroposlib.api.store.direct_io import (
    ALIGN,
    DIRECT_MIN_BYTES,
    AlignedBuffers,
    open_direct,
    padded,
    read_direct,
    write_direct,
)

SEGMENT_BYTES = 256 * 1024 * 1024
"""A new segment file is started once the current one holds this many bytes."""

logger = logging.getLogger("atroposlib.api")

PayloadRef = tuple[int, int, int, int]
"""(segment number, offset, length, crc32) of a stored payload."""


class SegmentFiles:
    """The payload files under one directory; thread-safe ``write``."""

    def __init__(self, blob_dir: Path, *, fdatasync: bool = False) -> None:
        self.blob_dir = Path(blob_dir)
        self.blob_dir.mkdir(exist_ok=True)
        self._fdatasync = fdatasync
        self._readers: dict[int, int] = {}
        self._writers: dict[int, int] = {}
        self._direct_readers: dict[int, Optional[int]] = {}
        self._direct_writers: dict[int, Optional[int]] = {}
        self._direct = True  # cleared if the filesystem refuses direct I/O
        self._buffers = AlignedBuffers()
        self._lock = threading.Lock()
        existing = self.numbers()
        self._open(existing[-1] if existing else 1)

    @property
    def current(self) -> int:
        """The segment being appended to."""
        return self._segno

    def numbers(self) -> list[int]:
        """Segment numbers present on disk, ascending."""
        return sorted(int(p.stem) for p in self.blob_dir.glob("*.seg") if p.stem.isdigit())

    def _path(self, segno: int) -> Path:
        return self.blob_dir / f"{segno:08d}.seg"

    def _open(self, segno: int) -> None:
        self._segno = segno
        path = self._path(segno)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._writers[segno] = fd
        self._direct_writers[segno] = open_direct(path, os.O_WRONLY) if self._direct else None
        self._woff = os.fstat(fd).st_size

    def write(self, blob: bytes) -> PayloadRef:
        """Reserve space in the current segment and write ``blob`` there. The write itself runs
        without holding the lock, so it overlaps with other requests' work."""
        with self._lock:
            if self._woff >= SEGMENT_BYTES:
                self._open(self._segno + 1)
            segno, fd = self._segno, self._writers[self._segno]
            direct_fd = self._direct_writers.get(segno) if len(blob) >= DIRECT_MIN_BYTES else None
            if direct_fd is not None and self._direct:
                off = padded(self._woff)
                self._woff = off + padded(len(blob))
            else:
                direct_fd = None
                off = self._woff
                self._woff += len(blob)
        if direct_fd is not None:
            try:
                write_direct(direct_fd, blob, off, self._buffers)
                fd = direct_fd
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                logger.warning(
                    "direct I/O refused in %s (%s); using buffered writes", self.blob_dir, e
                )
                self._direct = False
                direct_fd = None
        if direct_fd is None:
            view = memoryview(blob)
            pos = off
            while view:
                written = os.pwrite(fd, view, pos)
                view, pos = view[written:], pos + written
        if self._fdatasync:
            os.fdatasync(fd)
        return segno, off, len(blob), zlib.crc32(blob)

    def _reader(self, segno: int) -> int:
        fd = self._readers.get(segno)
        if fd is None:
            fd = os.open(self._path(segno), os.O_RDONLY)
            self._readers[segno] = fd
        return fd

    def _direct_reader(self, segno: int) -> Optional[int]:
        if segno not in self._direct_readers:
            direct = open_direct(self._path(segno), os.O_RDONLY) if self._direct else None
            self._direct_readers[segno] = direct
        return self._direct_readers[segno]

    def read(self, segno: int, off: int, length: int, crc: int) -> Optional[bytes]:
        """The payload, or None (logged) when it is unreadable or fails its crc32."""
        try:
            direct_fd = None
            if length >= DIRECT_MIN_BYTES and off % ALIGN == 0 and self._direct:
                direct_fd = self._direct_reader(segno)
            if direct_fd is not None:
                data = read_direct(direct_fd, off, length, self._buffers)
            else:
                data = os.pread(self._reader(segno), length, off)
        except OSError as e:
            logger.error("payload of segment %d at %d unreadable: %s", segno, off, e)
            return None
        if len(data) != length or zlib.crc32(data) != crc:
            logger.error(
                "payload of segment %d at %d is corrupt (lost in a power failure?)", segno, off
            )
            return None
        return data

    def drop(self, segno: int) -> None:
        """Close and delete one segment that nothing references (never the current one)."""
        if segno == self._segno:
            raise ValueError("the segment being written cannot be dropped")
        for fds in (self._readers, self._writers, self._direct_readers, self._direct_writers):
            fd = fds.pop(segno, None)
            if fd is not None:
                os.close(fd)
        self._path(segno).unlink(missing_ok=True)

    def _close_fds(self) -> None:
        for fds in (self._writers, self._readers, self._direct_writers, self._direct_readers):
            for fd in fds.values():
                if fd is not None:
                    os.close(fd)
            fds.clear()

    def clear(self) -> None:
        """Delete every segment and start a new one (a reset of the run)."""
        with self._lock:
            self._close_fds()
            for path in self.blob_dir.glob("*.seg"):
                path.unlink(missing_ok=True)
            self._open(self._segno + 1)

    def close(self) -> None:
        self._close_fds()


__all__ = ["SEGMENT_BYTES", "PayloadRef", "SegmentFiles"]

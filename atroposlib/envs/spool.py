"""A durable, ordered on-disk queue of groups waiting for the trajectory API.

``groups.jsonl`` is append-only (one group per line, fsynced); ``sent.offset`` records how far the
sender got (written atomically). ``peek()`` returns the oldest unsent group, ``ack()`` moves past it;
when everything is sent the file is truncated. A restarted env resends what a crash left unsent, in
order; the API drops duplicates by ``group_id``. One process at a time owns a spool (a file lock). Groups the API rejects for good (4xx) are moved to
``rejected.jsonl`` next to it (kept, counted, logged) so they never block the queue.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path
from typing import Any, Optional, Union

import orjson

from atroposlib.errors import ConfigError


class Spool:
    def __init__(self, directory: Union[str, Path]) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.dir / ".lock", "w")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise ConfigError(
                f"spool directory {self.dir} is used by another running env; "
                "give each env its own --env.spool_dir"
            ) from None
        self.path = self.dir / "groups.jsonl"
        self.offset_path = self.dir / "sent.offset"
        self.rejected_path = self.dir / "rejected.jsonl"
        self._f = open(self.path, "ab")
        self.offset = int(self.offset_path.read_text() or 0) if self.offset_path.exists() else 0
        self.appended = 0
        self.acked = 0
        self.rejected = 0

    def append(self, group: dict[str, Any]) -> None:
        self._f.write(orjson.dumps(group, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.appended += 1

    def peek(self) -> Optional[tuple[int, dict[str, Any]]]:
        """(offset after the line, group) of the oldest unsent group, or None."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            line = f.readline()
        if not line.endswith(b"\n"):
            return None  # nothing, or a line still being written
        return self.offset + len(line), orjson.loads(line)

    def ack(self, next_offset: int) -> None:
        self.offset = next_offset
        self.acked += 1
        if self.offset >= os.path.getsize(self.path):
            self._f.truncate(0)
            self._f.seek(0)
            self.offset = 0
        tmp = self.offset_path.with_suffix(".tmp")
        tmp.write_text(str(self.offset))
        os.replace(tmp, self.offset_path)

    def reject(self, next_offset: int, group: dict[str, Any], reason: str) -> None:
        with open(self.rejected_path, "ab") as f:
            f.write(
                orjson.dumps({"reason": reason, "group": group}, option=orjson.OPT_SERIALIZE_NUMPY)
                + b"\n"
            )
        self.rejected += 1
        self.ack(next_offset)
        self.acked -= 1

    def pending(self) -> int:
        """Number of unsent groups (reads the file; for status and tests)."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return sum(1 for line in f if line.endswith(b"\n"))

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()
        if not self._lock.closed:
            self._lock.close()


class SpoolSink:
    """``env.group_sink`` in serve mode: groups go to the durable spool, the sender takes them from there."""

    def __init__(self, spool: Spool, wake: asyncio.Event) -> None:
        self.spool, self.wake = spool, wake

    async def put(self, group: dict[str, Any]) -> None:
        self.spool.append(group)
        self.wake.set()


__all__ = ["Spool", "SpoolSink"]

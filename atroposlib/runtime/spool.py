"""A durable, ordered on-disk queue of groups waiting for the trajectory API.

``groups.jsonl`` is append-only (one group per line, fsynced); ``sent.offset`` records how far the
sender got (written atomically). ``peek()`` returns the oldest unsent group, ``ack()`` moves past it;
when everything is sent the file is truncated. A restarted env resends what a crash left unsent, in
order; the API drops duplicates by ``group_id``. One process at a time owns a spool (a file lock).
Groups the API rejects for good (a 4xx about their content) are moved to ``rejected.jsonl`` next to
it (kept with the reason, counted, logged) so they never block the queue;
``python -m atroposlib.runtime.spool resend DIR`` puts them back once the cause is fixed.

The spool is bounded (``max_groups`` unsent groups, ``max_bytes`` of them): ``SpoolSink.put``
waits while it is full, so a worker that finished a group holds it instead of growing the spool,
and the env stops generating (the runner also counts spooled groups against its off-policy budget,
see ``backpressure``).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

import orjson

from atroposlib.errors import AtroposError, ConfigError

logger = logging.getLogger(__name__)

DEFAULT_MAX_GROUPS = 1024
DEFAULT_MAX_BYTES = 1 << 30


class Spool:
    def __init__(
        self,
        directory: Union[str, Path],
        max_groups: int = DEFAULT_MAX_GROUPS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
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
        self.max_groups, self.max_bytes = max_groups, max_bytes
        # unsent groups and their bytes, kept in memory (counted once here, then updated)
        self.unsent, self.unsent_bytes = self._count_unsent()

    def _count_unsent(self) -> tuple[int, int]:
        n = size = 0
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for line in f:
                if line.endswith(b"\n"):
                    n += 1
                    size += len(line)
        return n, size

    def full(self) -> bool:
        """At or over the bound (the first group always fits, however large)."""
        return self.unsent > 0 and (
            self.unsent >= self.max_groups or self.unsent_bytes >= self.max_bytes
        )

    def append(self, group: Mapping[str, Any]) -> None:
        line = orjson.dumps(group, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        self._f.write(line)
        self._f.flush()
        os.fsync(self._f.fileno())
        self.appended += 1
        self.unsent += 1
        self.unsent_bytes += len(line)

    def peek(self) -> Optional[tuple[int, dict[str, Any]]]:
        """(offset after the line, group) of the oldest unsent group, or None."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            line = f.readline()
        if not line.endswith(b"\n"):
            return None  # nothing, or a line still being written
        return self.offset + len(line), orjson.loads(line)

    def ack(self, next_offset: int) -> None:
        self.unsent = max(0, self.unsent - 1)
        self.unsent_bytes = max(0, self.unsent_bytes - (next_offset - self.offset))
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
        """Number of unsent groups."""
        return self.unsent

    def resend_rejected(self) -> int:
        """Append every group of ``rejected.jsonl`` to the spool again (the API drops any it
        already has by ``group_id``) and empty it; returns how many."""
        if not self.rejected_path.exists():
            return 0
        n = 0
        with open(self.rejected_path, "rb") as f:
            for line in f:
                if line.strip():
                    self.append(orjson.loads(line)["group"])
                    n += 1
        self.rejected_path.unlink()
        return n

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()
        if not self._lock.closed:
            self._lock.close()


class SpoolSink:
    """``env.group_sink`` in serve mode: groups go to the durable spool, the sender takes them from
    there. While the spool is full, ``put`` waits (said once, on one line, until it drains)."""

    def __init__(self, spool: Spool, wake: asyncio.Event, poll_seconds: float = 0.2) -> None:
        self.spool, self.wake, self.poll_seconds = spool, wake, poll_seconds
        self.waiting = 0
        self.full_since: Optional[float] = None

    async def put(self, group: Mapping[str, Any]) -> None:
        s = self.spool
        if s.full():
            self.waiting += 1
            loop = asyncio.get_running_loop()
            if self.full_since is None:
                self.full_since = loop.time()
                logger.warning(
                    "spool %s is full (%d groups / %d bytes unsent; limits %d / %d): finished "
                    "groups wait and generation pauses until the API takes groups",
                    s.dir,
                    s.unsent,
                    s.unsent_bytes,
                    s.max_groups,
                    s.max_bytes,
                )
            try:
                while s.full():
                    await asyncio.sleep(self.poll_seconds)
            finally:
                self.waiting -= 1
            if self.full_since is not None and not self.waiting:
                logger.warning("spool has room again after %.1fs", loop.time() - self.full_since)
                self.full_since = None
        s.append(group)
        self.wake.set()


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m atroposlib.runtime.spool resend DIR``: requeue the groups the API rejected."""
    p = argparse.ArgumentParser(prog="python -m atroposlib.runtime.spool")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("resend", help="put the groups of DIR/rejected.jsonl back into the spool")
    r.add_argument("dir")
    args = p.parse_args(argv)
    try:
        spool = Spool(args.dir)
    except AtroposError as e:
        print(f"spool: error: {e}", file=sys.stderr)
        return 1
    try:
        n = spool.resend_rejected()
    finally:
        spool.close()
    print(f"{n} rejected group(s) put back into {spool.path}; the env sends them on its next start")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_GROUPS", "Spool", "SpoolSink", "main"]

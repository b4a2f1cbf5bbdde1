"""SQLite store (the default): ``trajectories.sqlite3`` plus append-only payload segments under
the data directory.

Metadata (run, envs, group states, batches) lives in SQLite (WAL journal). Group payloads (compact
JSON, ~1 MB for 16 x 2048 tokens) are appended to segment files ``blobs/NNNNNNNN.seg`` and the row
keeps (segment, offset, length, crc32): storing MB-sized BLOBs inside SQLite writes them twice (WAL,
then checkpoint) and measured 3x slower here. A payload is written *before* the transaction that
references it commits, so a committed row never points at bytes that were not written.

``synchronous=NORMAL`` (default): the payload ``write()`` and the WAL commit happen before the API
answers, so an acknowledged group survives a crash of the process (SIGKILL, OOM kill); a power loss
can drop the last commits (a payload whose bytes did not reach the disk fails its crc32 on read and
is dropped with an error log). ``synchronous=FULL`` fdatasyncs the segment and the WAL on every
commit, so acknowledged groups also survive power loss. Each ``Mutation`` is one transaction.
Segments whose groups are all acknowledged (and out of the peek history) are deleted.
Payload files are ``segments.SegmentFiles`` (large payloads use ``O_DIRECT`` where the filesystem
allows it: the page cache is the most expensive part of storing a group on small machines).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import orjson

from atroposlib.api.packing import GroupMeta
from atroposlib.api.store.base import (
    ACKED,
    DROPPED,
    LIVE_STATES,
    BatchRecord,
    GroupRow,
    Mutation,
    PeekRow,
    Snapshot,
    Store,
)
from atroposlib.api.store.segments import PayloadRef, SegmentFiles
from atroposlib.errors import ConfigError

DB_NAME = "trajectories.sqlite3"
logger = logging.getLogger("atroposlib.api")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS envs (env_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    seq INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    env_id INTEGER,
    env_name TEXT,
    n INTEGER NOT NULL,
    policy_version INTEGER,
    max_len INTEGER NOT NULL,
    nbytes INTEGER NOT NULL,
    group_id TEXT UNIQUE,
    received_at REAL NOT NULL,
    qorder INTEGER NOT NULL DEFAULT 0,
    segment INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER,
    crc INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS groups_state_seq ON groups(state, seq);
CREATE INDEX IF NOT EXISTS groups_segment ON groups(segment, length);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    step INTEGER NOT NULL,
    seqs BLOB NOT NULL,
    acked INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_acked ON batches(acked);
"""


def _lock_data_dir(data_dir: Path) -> int:
    """Exclusive advisory lock: two servers appending to the same segments would corrupt them.
    The kernel releases it when the process dies, so a SIGKILLed server never blocks its restart."""
    fd = os.open(data_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ConfigError(f"data dir {data_dir} is in use by another run-api process") from None
    return fd


class SqliteStore(Store):
    durable = True

    def __init__(self, data_dir: Path, synchronous: str = "NORMAL") -> None:
        data_dir = Path(data_dir)
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create data dir {data_dir}: {e}") from None
        self.path = data_dir / DB_NAME
        self._lock_fd: Optional[int] = _lock_data_dir(data_dir)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise ConfigError(f"cannot open the store {self.path}: {e}") from None
        self._full = synchronous == "FULL"
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if self._full else 'NORMAL'}")
        self._db.execute("PRAGMA temp_store=MEMORY")
        self._db.executescript(_SCHEMA)
        self.segments = SegmentFiles(data_dir / "blobs", fdatasync=self._full)

    def stage(self, blob: bytes) -> PayloadRef:
        """Write the payload to its segment before the transaction that references it commits."""
        return self.segments.write(blob)

    # -- reads -------------------------------------------------------------------------------
    def load(self) -> Snapshot:
        db = self._db
        snap = Snapshot()
        snap.meta = {k: orjson.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
        snap.envs = [
            orjson.loads(d) for (d,) in db.execute("SELECT data FROM envs ORDER BY env_id")
        ]
        marks = ",".join("?" * len(LIVE_STATES))
        for row in db.execute(
            "SELECT seq, state, env_id, env_name, n, policy_version, max_len, nbytes, group_id,"
            f" received_at, qorder FROM groups WHERE state IN ({marks}) ORDER BY qorder, seq",
            LIVE_STATES,
        ):
            seq, state, env_id, env_name, n, pv, max_len, nbytes, gid, received_at, order = row
            meta = GroupMeta(seq, n, env_id, pv, max_len, nbytes, gid, received_at, order)
            snap.live_groups.append(GroupRow(meta, state, env_name))
        snap.group_ids = dict(
            db.execute("SELECT group_id, seq FROM groups WHERE group_id IS NOT NULL ORDER BY seq")
        )
        snap.max_seq, snap.max_order = db.execute(
            "SELECT COALESCE(MAX(seq), 0), COALESCE(MAX(qorder), 0) FROM groups"
        ).fetchone()
        pending = db.execute(
            "SELECT batch_id, step, seqs, created_at FROM batches WHERE acked = 0 ORDER BY created_at DESC"
        ).fetchone()
        if pending:
            snap.pending_batch = BatchRecord(
                pending[0], pending[1], orjson.loads(pending[2]), pending[3]
            )
        return snap

    def get_blobs(self, seqs: Sequence[int]) -> list[bytes]:
        found: dict[int, bytes] = {}
        for i in range(0, len(seqs), 500):
            chunk = list(seqs[i : i + 500])
            q = (
                "SELECT seq, segment, offset, length, crc FROM groups"
                f" WHERE length IS NOT NULL AND seq IN ({','.join('?' * len(chunk))})"
            )
            for seq, segno, off, length, crc in self._db.execute(q, chunk).fetchall():
                data = self.segments.read(segno, off, length, crc)
                if data is not None:
                    found[seq] = data
        return [found[s] for s in seqs]

    def peek(self, limit: int, after: Optional[int], env_name: Optional[str]) -> list[PeekRow]:
        where: list[str] = ["length IS NOT NULL"]
        args: list[int | str] = []
        if after is not None:
            where.append("seq > ?")
            args.append(after)
        if env_name is not None:
            where.append("env_name = ?")
            args.append(env_name)
        order = "ASC" if after is not None else "DESC"
        rows = self._db.execute(
            "SELECT seq, received_at, env_name, state, segment, offset, length, crc FROM groups"
            f" WHERE {' AND '.join(where)} ORDER BY seq {order} LIMIT ?",
            (*args, limit),
        ).fetchall()
        rows.sort(key=lambda r: r[0])
        out = []
        for seq, received_at, name, state, segno, off, length, crc in rows:
            data = self.segments.read(segno, off, length, crc)
            if data is not None:
                out.append(PeekRow(seq, received_at, name, state, data))
        return out

    def batch_acked(self, batch_id: str) -> Optional[bool]:
        row = self._db.execute(
            "SELECT acked FROM batches WHERE batch_id = ?", (batch_id,)
        ).fetchone()
        return None if row is None else bool(row[0])

    # -- writes ------------------------------------------------------------------------------
    def commit(self, m: Mutation) -> None:
        db = self._db
        # payloads were staged first: a committed row never references bytes that were not written
        locations = [loc if isinstance(loc, tuple) else self.stage(loc) for _, loc in m.new_groups]
        db.execute("BEGIN IMMEDIATE")
        try:
            if m.meta:
                db.executemany(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    [(k, orjson.dumps(v)) for k, v in m.meta.items()],
                )
            if m.envs:
                db.executemany(
                    "INSERT OR REPLACE INTO envs (env_id, data) VALUES (?, ?)",
                    [(e["env_id"], orjson.dumps(e)) for e in m.envs],
                )
            if m.new_groups:
                db.executemany(
                    "INSERT INTO groups (seq, state, env_id, env_name, n, policy_version, max_len,"
                    " nbytes, group_id, received_at, qorder, segment, offset, length, crc)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    [
                        (
                            r.meta.seq,
                            r.state,
                            r.meta.env_id,
                            r.env_name,
                            r.meta.n,
                            r.meta.policy_version,
                            r.meta.max_len,
                            r.meta.nbytes,
                            r.meta.group_id,
                            r.meta.received_at,
                            r.meta.order,
                            *loc,
                        )
                        for (r, _), loc in zip(m.new_groups, locations, strict=True)
                    ],
                )
            if m.states:
                db.executemany(
                    "UPDATE groups SET state = ? WHERE seq = ?",
                    [(s, q) for q, s in m.states.items()],
                )
            if m.orders:
                db.executemany(
                    "UPDATE groups SET qorder = ? WHERE seq = ?",
                    [(o, q) for q, o in m.orders.items()],
                )
            if m.new_batch is not None:
                b = m.new_batch
                db.execute(
                    "INSERT INTO batches (batch_id, step, seqs, acked, created_at) VALUES (?,?,?,0,?)",
                    (b.batch_id, b.step, orjson.dumps(b.seqs), b.created_at or time.time()),
                )
            if m.acked_batch is not None:
                db.execute("UPDATE batches SET acked = 1 WHERE batch_id = ?", (m.acked_batch,))
            if m.forget_below_seq is not None:
                db.execute(
                    "DELETE FROM groups WHERE seq < ? AND state IN (?, ?)",
                    (m.forget_below_seq, ACKED, DROPPED),
                )
            if m.prune_below_seq is not None:
                for state in (ACKED, DROPPED):
                    db.execute(
                        "UPDATE groups SET length = NULL WHERE state = ? AND seq < ? AND length IS NOT NULL",
                        (state, m.prune_below_seq),
                    )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if m.prune_below_seq is not None:
            self._delete_dead_segments()

    def _delete_dead_segments(self) -> None:
        """Remove segment files (except the one being written) no live or peekable row points into."""
        for segno in self.segments.numbers():
            if segno == self.segments.current:
                continue
            alive = self._db.execute(
                "SELECT 1 FROM groups WHERE segment = ? AND length IS NOT NULL LIMIT 1", (segno,)
            ).fetchone()
            if alive is None:
                self.segments.drop(segno)

    def reset(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for table in ("meta", "envs", "groups", "batches"):
                db.execute(f"DELETE FROM {table}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.segments.clear()

    def close(self) -> None:
        self.segments.close()
        try:
            self._db.close()
        except sqlite3.Error:  # pragma: no cover - closing twice
            pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


__all__ = ["DB_NAME", "SqliteStore"]

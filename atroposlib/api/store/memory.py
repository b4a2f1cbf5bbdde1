"""In-memory store: same interface as the SQLite one, nothing survives the process (``--store memory``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Optional

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


class MemoryStore(Store):
    durable = False

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._meta: dict[str, Any] = {}
        self._envs: dict[int, dict[str, Any]] = {}
        self._rows: dict[int, GroupRow] = {}
        self._blobs: dict[int, bytes] = {}
        self._batches: dict[str, BatchRecord] = {}
        self._acked: dict[str, bool] = {}
        self._group_ids: dict[str, int] = {}

    def load(self) -> Snapshot:
        pending = list(self._batches.values())
        return Snapshot(
            meta=copy.deepcopy(self._meta),
            envs=[copy.deepcopy(e) for _, e in sorted(self._envs.items())],
            live_groups=sorted(
                (r for r in self._rows.values() if r.state in LIVE_STATES),
                key=lambda r: (r.meta.order, r.meta.seq),
            ),
            pending_batch=pending[-1] if pending else None,
            group_ids=dict(sorted(self._group_ids.items(), key=lambda kv: kv[1])),
            max_seq=max(self._rows, default=0),
            max_order=max((r.meta.order for r in self._rows.values()), default=0),
        )

    def commit(self, m: Mutation) -> None:
        self._meta.update(m.meta)
        for env in m.envs:
            self._envs[env["env_id"]] = dict(env)
        for row, blob in m.new_groups:
            self._rows[row.meta.seq] = row
            self._blobs[row.meta.seq] = blob
            if row.meta.group_id is not None:
                self._group_ids[row.meta.group_id] = row.meta.seq
        for seq, state in m.states.items():
            self._rows[seq].state = state
        for seq, order in m.orders.items():
            self._rows[seq].meta.order = order
        if m.new_batch is not None:
            self._batches[m.new_batch.batch_id] = m.new_batch
            self._acked[m.new_batch.batch_id] = False
        if m.acked_batch is not None:
            self._acked[m.acked_batch] = True
            self._batches.pop(m.acked_batch, None)  # the id stays known as acknowledged
        if m.forget_below_seq is not None:
            for seq in [s for s in self._rows if s < m.forget_below_seq]:
                row = self._rows[seq]
                if row.state in (ACKED, DROPPED):
                    del self._rows[seq]
                    self._blobs.pop(seq, None)
                    gid = row.meta.group_id
                    if gid is not None and self._group_ids.get(gid) == seq:
                        del self._group_ids[gid]
        if m.prune_below_seq is not None:
            for seq in [s for s in self._blobs if s < m.prune_below_seq]:
                if self._rows[seq].state in (ACKED, DROPPED):
                    del self._blobs[seq]

    def get_blobs(self, seqs: Sequence[int]) -> list[bytes]:
        return [self._blobs[s] for s in seqs]

    def peek(self, limit: int, after: Optional[int], env_name: Optional[str]) -> list[PeekRow]:
        seqs = sorted(self._blobs)
        if after is not None:
            seqs = [s for s in seqs if s > after]
        if env_name is not None:
            seqs = [s for s in seqs if self._rows[s].env_name == env_name]
        seqs = seqs[:limit] if after is not None else seqs[-limit:] if limit else []
        out = []
        for s in seqs:
            r = self._rows[s]
            out.append(PeekRow(s, r.meta.received_at, r.env_name, r.state, self._blobs[s]))
        return out

    def batch_acked(self, batch_id: str) -> Optional[bool]:
        return self._acked.get(batch_id)


__all__ = ["MemoryStore"]

"""Ingest of scored groups into the run: idempotency, backpressure, mixed-size buffers, commit.

``IngestMixin`` is part of ``RunService`` (it uses the service's lock, store, queue and buffers).
"""

from __future__ import annotations

import time
from typing import Optional

from atroposlib.api.http import ApiProblem
from atroposlib.api.packing import GroupMeta, pick_exact_subset
from atroposlib.api.run_state import RunState
from atroposlib.api.store.base import BUFFERED, QUEUED, GroupRow, Mutation
from atroposlib.type_definitions import ScoredDataResponse


class IncomingGroup:
    """A validated group ready to store: its compact JSON bytes and packing metadata."""

    __slots__ = ("blob", "n", "env_id", "policy_version", "max_len", "group_id")

    def __init__(
        self,
        blob: bytes,
        n: int,
        env_id: Optional[int],
        policy_version: Optional[int],
        max_len: int,
        group_id: Optional[str],
    ) -> None:
        self.blob, self.n, self.env_id = blob, n, env_id
        self.policy_version, self.max_len, self.group_id = policy_version, max_len, group_id


class IngestMixin(RunState):
    """``RunService.ingest`` and its helpers."""

    def ingest(self, groups: list[IncomingGroup]) -> list[ScoredDataResponse]:
        """Commit groups atomically (all or none); one answer per group."""
        t0 = time.perf_counter()
        # cheap early refusal before any payload I/O
        self._check_room(sum(g.n for g in groups), sum(len(g.blob) for g in groups))
        # payload I/O happens outside the lock, overlapping with other requests' parsing
        staged = [
            None if g.group_id in self.group_ids else self.store.stage(g.blob) for g in groups
        ]
        with self.lock:
            fresh = []
            seen = set()
            for g in groups:
                dup = g.group_id is not None and (
                    g.group_id in self.group_ids or g.group_id in seen
                )
                fresh.append(not dup)
                if g.group_id is not None:
                    seen.add(g.group_id)
            kept = [g for g, ok in zip(groups, fresh, strict=True) if ok]
            self._check_room(sum(g.n for g in kept), sum(len(g.blob) for g in kept))
            if self.registration is not None:
                bs = self.registration.batch_size
                for i, g in enumerate(groups):
                    if g.n > bs:
                        where = f"[{i}]: " if len(groups) > 1 else ""
                        raise ApiProblem(
                            422,
                            f"{where}group has {g.n} sequences but the trainer's batch_size is {bs}; "
                            "it could never be delivered",
                        )
            m = Mutation()
            now = time.time()
            answers: list[ScoredDataResponse] = []
            to_queue: list[GroupMeta] = []
            buffers = {k: list(v) for k, v in self.buffers.items()}
            latest = self.latest_seq
            seq = self.next_seq
            order = self.next_order
            new_rows: dict[int, GroupRow] = {}
            for g, ok, handle in zip(groups, fresh, staged, strict=True):
                if not ok:
                    self.metrics.duplicates.inc()
                    answers.append(ScoredDataResponse(status="received", duplicate=True))
                    continue
                meta = GroupMeta(
                    seq, g.n, g.env_id, g.policy_version, g.max_len, len(g.blob), g.group_id, now
                )
                seq += 1
                row = GroupRow(meta, QUEUED, self._env_name(g.env_id))
                m.new_groups.append(
                    (row, handle if handle is not None else self.store.stage(g.blob))
                )
                new_rows[meta.seq] = row
                env = self.envs.find(g.env_id)  # groups of unregistered envs are kept (Atropos)
                if env is not None and g.n < env.group_size:
                    row.state = BUFFERED
                    buf = buffers.setdefault(env.env_id, [])
                    buf.append(meta)
                    for released in self._release_from_buffer(buf, env.group_size):
                        released.order = order
                        order += 1
                        if released.seq in new_rows:
                            new_rows[released.seq].state = QUEUED
                        else:
                            m.states[released.seq] = QUEUED
                            m.orders[released.seq] = released.order
                        to_queue.append(released)
                        latest = released.seq
                    answers.append(
                        ScoredDataResponse(status="buffered", buffer_size=sum(x.n for x in buf))
                    )
                else:
                    meta.order = order
                    order += 1
                    to_queue.append(meta)
                    latest = meta.seq
                    answers.append(ScoredDataResponse(status="received"))
            if latest != self.latest_seq:
                m.meta["latest_seq"] = latest
            if m.new_groups:
                self._commit(m)
            self.next_seq = seq
            self.latest_seq = latest
            self.buffers = {k: v for k, v in buffers.items() if v}
            self.next_order = order
            for meta in to_queue:  # already in queue-entry order
                self.queue.add(meta)
            for row, _ in m.new_groups:
                if row.meta.group_id is not None:
                    self.group_ids[row.meta.group_id] = row.meta.seq
                self.metrics.groups_in.labels(row.env_name or "none").inc()
                self.env_groups[(row.env_name or str(row.meta.env_id), "received")] += 1
                self.metrics.bytes_in.inc(row.meta.nbytes)
                self.metrics.sequences_in.inc(row.meta.n)
            self._update_gauges()
        self.metrics.ingest_latency.observe(time.perf_counter() - t0)
        return answers

    def _check_room(self, incoming: int, incoming_bytes: int) -> None:
        """503 + Retry-After when the new sequences or bytes would exceed the bounds (a lone group is
        always accepted into an empty queue, so an oversized group cannot deadlock the run)."""
        held = self.queue.total_sequences + self.buffered_sequences()
        held_bytes = self.queue.total_bytes + sum(
            g.nbytes for b in self.buffers.values() for g in b
        )
        s = self.settings
        if (
            incoming
            and held > 0
            and (
                held + incoming > s.max_queued_sequences
                or held_bytes + incoming_bytes > s.max_queued_bytes
            )
        ):
            self.metrics.backpressure.inc()
            raise ApiProblem(
                503,
                f"queue is full ({held} sequences / {held_bytes} bytes held, limits "
                f"{s.max_queued_sequences} / {s.max_queued_bytes}); retry later",
                headers={"Retry-After": f"{s.retry_after_seconds:g}"},
            )

    @staticmethod
    def _release_from_buffer(buf: list[GroupMeta], group_size: int) -> list[GroupMeta]:
        """Atropos's mixed-size buffer: release the oldest subset summing to the env's group size;
        if none exists and the buffer holds >= 2x group size sequences, release it all (no stalls)."""
        idx = pick_exact_subset([g.n for g in buf], group_size)
        if idx is None:
            if sum(g.n for g in buf) < 2 * group_size:
                return []
            idx = list(range(len(buf)))
        released = [buf[i] for i in idx]
        for i in sorted(idx, reverse=True):
            del buf[i]
        return released


__all__ = ["IncomingGroup", "IngestMixin"]

"""The run's state and rules (registration, envs, ingest, batches, acks), independent of HTTP.

``RunService`` keeps the working state in memory (a ``QueueIndex``, the envs, the step) and writes
every change through the store in one atomic ``Mutation`` *before* the route answers, so a 200 means
committed. On start it rebuilds itself from ``store.load()``. All methods take one lock.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import uuid
from collections import Counter
from typing import Any, Optional

import orjson

from atroposlib.api.http import ApiProblem
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.packing import GroupMeta, QueueIndex, length_bucket, pick_exact_subset
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store.base import (
    ACKED,
    BUFFERED,
    DELIVERED,
    DROPPED,
    QUEUED,
    BatchRecord,
    GroupRow,
    Mutation,
    Store,
)
from atroposlib.type_definitions import RegisterEnv, Registration

logger = logging.getLogger("atroposlib.api")

MIN_ENV_WEIGHT = 0.01
EMPTY_EXAMPLE = {
    "tokens": [],
    "masks": [],
    "scores": [],
    "advantages": [],
    "ref_logprobs": [],
    "generation_params": [],
    "inference_logprobs": [],
    "messages": [],
    "images": [],
}


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


class RunService:
    def __init__(self, settings: ApiSettings, store: Store, metrics: ApiMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.lock = threading.RLock()
        self._acks_since_prune = 0
        self._load()

    # ------------------------------------------------------------------ state
    def _clear(self) -> None:
        self.registration: Optional[dict[str, Any]] = None
        self.step = 0
        self.started = False
        self.envs: list[dict[str, Any]] = []
        self.queue = QueueIndex()
        self.buffers: dict[int, list[GroupMeta]] = {}
        self.pending: Optional[BatchRecord] = None
        self.redeliver = False
        self.group_ids: set = set()
        self.next_seq = 1
        self.latest_seq: Optional[int] = None
        self.stale_drops: Counter = Counter()
        self.blocked_by: Optional[str] = None

    def _load(self) -> None:
        self._clear()
        snap = self.store.load()
        self.registration = snap.meta.get("registration")
        self.step = int(snap.meta.get("step", 0))
        self.started = bool(snap.meta.get("started", False))
        self.latest_seq = snap.meta.get("latest_seq")
        self.stale_drops = Counter({(e, b): n for e, b, n in snap.meta.get("stale_drops", [])})
        self.envs = snap.envs
        self.group_ids = snap.group_ids
        self.next_seq = snap.max_seq + 1
        pending_seqs = set(snap.pending_batch.seqs) if snap.pending_batch else set()
        for row in snap.live_groups:
            if row.state == BUFFERED and row.meta.env_id is not None:
                self.buffers.setdefault(row.meta.env_id, []).append(row.meta)
            elif row.state == DELIVERED and row.meta.seq in pending_seqs:
                continue
            else:
                self.queue.add(row.meta)
        if snap.pending_batch is not None:
            self.pending = snap.pending_batch
            self.redeliver = True  # a restart puts the unacknowledged batch back for redelivery
        self._update_gauges()
        if self.registration or len(self.queue) or self.pending:
            logger.info(
                "restored run: step %d, %d queued groups, %d buffered, pending batch: %s",
                self.step,
                len(self.queue),
                sum(len(b) for b in self.buffers.values()),
                self.pending.batch_id if self.pending else None,
            )

    def _update_gauges(self) -> None:
        m = self.metrics
        m.queue_groups.set(len(self.queue))
        m.queue_sequences.set(self.queue.total_sequences)
        m.buffered_sequences.set(self.buffered_sequences())
        m.current_step.set(self.step)

    def buffered_sequences(self) -> int:
        return sum(g.n for b in self.buffers.values() for g in b)

    def _env_name(self, env_id: Optional[int]) -> Optional[str]:
        if env_id is not None and 0 <= env_id < len(self.envs):
            return self.envs[env_id]["real_name"]
        return None

    # ------------------------------------------------------------------ trainer side
    def register(self, reg: Registration) -> dict[str, Any]:
        with self.lock:
            m = Mutation()
            if self.registration is None:  # Atropos: only the first /register initializes the run
                self.registration = reg.model_dump()
                self.step = reg.starting_step
                self.started = False
                m.meta.update(registration=self.registration, step=self.step, started=False)
                self.store.commit(m)
            if self.pending is not None:  # a (re)starting trainer gets the unacked batch again
                self.redeliver = True
            self._update_gauges()
            return {"uuid": secrets.randbits(52)}

    def _require_registration(self) -> dict[str, Any]:
        if self.registration is None:
            raise ApiProblem(409, "no trainer has registered yet: POST /register first")
        return self.registration

    def _min_sequences(self, batch_size: int) -> dict[Optional[int], int]:
        return {
            e["env_id"]: int(batch_size * e["min_batch_allocation"])
            for e in self.envs
            if e["connected"] and e.get("min_batch_allocation") is not None
        }

    def get_batch(self) -> bytes:
        """The body of ``GET /batch``: a redelivered or new batch, or ``{"batch": null}``."""
        t0 = time.perf_counter()
        with self.lock:
            reg = self._require_registration()
            m = Mutation()
            if not self.started:
                self.started = True
                m.meta["started"] = True
            if self.pending is not None:
                blobs, missing = (
                    self._read_payloads(self.pending.seqs) if self.redeliver else ([], [])
                )
                if self.redeliver and not missing:
                    self.redeliver = False
                    if m.meta:
                        self.store.commit(m)
                    self.metrics.redeliveries.inc()
                    body = self._batch_body(self.pending, blobs)
                    self.metrics.bytes_out.inc(len(body))
                    return body
                if missing:  # a payload lost to a power failure: the batch cannot be sent again
                    logger.error(
                        "batch %s lost %d payload(s); retiring it",
                        self.pending.batch_id,
                        len(missing),
                    )
                    self.metrics.corrupt_payloads.inc(len(missing))
                # implicit ack: the same session asks for more
                self._ack_into(m, self.pending)
            self._drop_stale(m)
            batch_size = int(reg["batch_size"])
            while True:
                result = self.queue.form_batch(batch_size, self._min_sequences(batch_size))
                self.blocked_by = result.blocked_by
                if result.seqs is None:
                    if m.meta or m.states or m.acked_batch:
                        self.store.commit(m)
                    self._update_gauges()
                    return orjson.dumps({"batch": None, "batch_id": None, "step": self.step})
                blobs, missing = self._read_payloads(result.seqs)
                if not missing:
                    break
                for seq in missing:  # unreadable payloads are dropped (logged, counted), never sent
                    self.queue.remove(seq)
                    m.states[seq] = DROPPED
                    self.metrics.corrupt_payloads.inc()
                    logger.error("group %d has an unreadable payload; dropped", seq)
            record = BatchRecord(uuid.uuid4().hex, self.step + 1, result.seqs, time.time())
            m.new_batch = record
            m.meta["step"] = record.step
            for seq in result.seqs:
                m.states[seq] = DELIVERED
            self.store.commit(m)
            for seq in result.seqs:
                self.queue.remove(seq)
            self.step = record.step
            self.pending = record
            self.redeliver = False
            self.metrics.batches_out.inc()
            self.metrics.groups_out.inc(len(result.seqs))
            self._update_gauges()
            body = self._batch_body(record, blobs)
            self.metrics.bytes_out.inc(len(body))
        self.metrics.batch_latency.observe(time.perf_counter() - t0)
        return body

    def _read_payloads(self, seqs: list[int]) -> tuple[list[bytes], list[int]]:
        """Payloads of ``seqs`` and the seqs whose payload is unreadable (normally none)."""
        try:
            return self.store.get_blobs(seqs), []
        except KeyError:
            blobs, missing = [], []
            for seq in seqs:
                try:
                    blobs.append(self.store.get_blobs([seq])[0])
                except KeyError:
                    missing.append(seq)
            return blobs, missing

    @staticmethod
    def _batch_body(record: BatchRecord, blobs: list[bytes]) -> bytes:
        tail = orjson.dumps({"batch_id": record.batch_id, "step": record.step})
        return b'{"batch":[' + b",".join(blobs) + b"]," + tail[1:]

    def _ack_into(self, m: Mutation, record: BatchRecord) -> None:
        m.acked_batch = record.batch_id
        for seq in record.seqs:
            m.states[seq] = ACKED
        self.pending = None
        self.redeliver = False
        self.metrics.acks.inc()
        self._acks_since_prune += 1
        if self._acks_since_prune >= 8:
            self._acks_since_prune = 0
            m.prune_below_seq = self.next_seq - self.settings.history_size

    def ack(self, batch_id: str) -> dict[str, Any]:
        with self.lock:
            if self.pending is not None and self.pending.batch_id == batch_id:
                step = self.pending.step
                m = Mutation()
                self._ack_into(m, self.pending)
                self.store.commit(m)
                return {"status": "acked", "batch_id": batch_id, "step": step}
            known = self.store.batch_acked(batch_id)
            if known:
                return {"status": "acked", "batch_id": batch_id, "already_acked": True}
            if known is None:
                raise ApiProblem(404, f"unknown batch_id {batch_id!r}")
            raise ApiProblem(409, f"batch {batch_id!r} is not the outstanding batch")

    def _drop_stale(self, m: Mutation) -> None:
        if self.settings.max_staleness is None:
            return
        floor = self.step - self.settings.max_staleness
        dropped = self.queue.pop_stale(floor)
        if not dropped:
            return
        for g in dropped:
            key = (self._env_name(g.env_id) or str(g.env_id), length_bucket(g.max_len))
            self.stale_drops[key] += 1
            self.metrics.stale_dropped.labels(*key).inc()
            m.states[g.seq] = DROPPED
        m.meta["stale_drops"] = [[e, b, n] for (e, b), n in sorted(self.stale_drops.items())]
        logger.info("dropped %d stale groups (policy_version < %d)", len(dropped), floor)

    # ------------------------------------------------------------------ env side
    def register_env(self, req: RegisterEnv) -> dict[str, Any]:
        with self.lock:
            if not self.started or self.registration is None:
                return {"status": "wait for trainer to start"}
            same = sum(1 for e in self.envs if e["desired_name"] == req.desired_name)
            env = {
                "env_id": len(self.envs),
                "max_context_len": req.max_token_length,
                "weight": req.weight if req.weight is not None else 1.0,
                "desired_name": req.desired_name,
                "real_name": f"{req.desired_name}_{same}",
                "connected": True,
                "min_batch_allocation": req.min_batch_allocation,
                "group_size": req.group_size,
                "registered_at": time.time(),
            }
            self.store.commit(Mutation(envs=[env]))
            self.envs.append(env)
            reg = self.registration
            return {
                "status": "success",
                "env_id": env["env_id"],
                "wandb_name": env["real_name"],
                "checkpoint_dir": reg.get("checkpoint_dir", ""),
                "starting_step": self.step,
                "checkpoint_interval": reg.get("save_checkpoint_interval", 0),
                "num_steps": reg.get("num_steps", 0),
            }

    def disconnect_env(self, env_id: int) -> dict[str, Any]:
        with self.lock:
            if not 0 <= env_id < len(self.envs):
                return {
                    "status": "failure",
                    "error": f"unknown env_id {env_id} ({len(self.envs)} registered)",
                }
            env = dict(self.envs[env_id], connected=False)
            self.store.commit(Mutation(envs=[env]))
            self.envs[env_id] = env
            return {"status": "success"}

    def ingest(self, groups: list[IncomingGroup]) -> list[dict[str, Any]]:
        """Commit groups atomically (all or none); one legacy status dict per group."""
        t0 = time.perf_counter()
        self._check_room(sum(g.n for g in groups))  # cheap early refusal before any payload I/O
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
            self._check_room(sum(g.n for g, ok in zip(groups, fresh, strict=True) if ok))
            if self.registration is not None:
                bs = int(self.registration["batch_size"])
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
            answers: list[dict[str, Any]] = []
            to_queue: list[GroupMeta] = []
            buffers = {k: list(v) for k, v in self.buffers.items()}
            latest = self.latest_seq
            seq = self.next_seq
            new_rows: dict[int, GroupRow] = {}
            for g, ok, handle in zip(groups, fresh, staged, strict=True):
                if not ok:
                    self.metrics.duplicates.inc()
                    answers.append({"status": "received", "duplicate": True})
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
                env = (
                    self.envs[g.env_id]
                    if g.env_id is not None and 0 <= g.env_id < len(self.envs)
                    else None
                )
                if env is not None and g.n < env["group_size"]:
                    row.state = BUFFERED
                    buf = buffers.setdefault(g.env_id, [])
                    buf.append(meta)
                    for released in self._release_from_buffer(buf, env["group_size"]):
                        if released.seq in new_rows:
                            new_rows[released.seq].state = QUEUED
                        else:
                            m.states[released.seq] = QUEUED
                        to_queue.append(released)
                        latest = released.seq
                    answers.append({"status": "buffered", "buffer_size": sum(x.n for x in buf)})
                else:
                    to_queue.append(meta)
                    latest = meta.seq
                    answers.append({"status": "received"})
            if latest != self.latest_seq:
                m.meta["latest_seq"] = latest
            if m.new_groups:
                self.store.commit(m)
            self.next_seq = seq
            self.latest_seq = latest
            self.buffers = {k: v for k, v in buffers.items() if v}
            for meta in sorted(to_queue, key=lambda x: x.seq):
                self.queue.add(meta)
            for row, _ in m.new_groups:
                if row.meta.group_id is not None:
                    self.group_ids.add(row.meta.group_id)
                self.metrics.groups_in.labels(row.env_name or "none").inc()
                self.metrics.bytes_in.inc(row.meta.nbytes)
                self.metrics.sequences_in.inc(row.meta.n)
            self._update_gauges()
        self.metrics.ingest_latency.observe(time.perf_counter() - t0)
        return answers

    def _check_room(self, incoming: int) -> None:
        """503 + Retry-After when ``incoming`` more sequences would exceed the bound (a lone group is
        always accepted into an empty queue, so an oversized group cannot deadlock the run)."""
        held = self.queue.total_sequences + self.buffered_sequences()
        if incoming and held > 0 and held + incoming > self.settings.max_queued_sequences:
            self.metrics.backpressure.inc()
            raise ApiProblem(
                503,
                f"queue is full ({held} sequences held, limit {self.settings.max_queued_sequences}); retry later",
                headers={"Retry-After": f"{self.settings.retry_after_seconds:g}"},
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

    def status_env(self, env_id: int) -> dict[str, Any]:
        """Atropos's /status-env, from the per-env counters (no queue scan)."""
        with self.lock:
            if not 0 <= env_id < len(self.envs):
                raise ApiProblem(404, f"unknown env_id {env_id} ({len(self.envs)} registered)")
            env = self.envs[env_id]
            connected = [e for e in self.envs if e["connected"]]
            total = sum(e["max_context_len"] * max(0.0, e["weight"]) for e in connected)
            weight = env["max_context_len"] * env["weight"] / total if total > 0 else 0.0
            weight = max(MIN_ENV_WEIGHT, weight)
            total_min = sum(
                e["min_batch_allocation"]
                for e in connected
                if e.get("min_batch_allocation") is not None
            )
            q = self.queue
            max_group = q.max_group_size()
            own_sizes = q.env_size_counts.get(env_id, {})
            env_group = max([env["group_size"], *own_sizes.keys()])
            own = q.env_sequences.get(env_id, 0)
            bs = int(self.registration["batch_size"]) if self.registration else 0
            mins = {
                e["env_id"]: int(bs * e["min_batch_allocation"])
                for e in connected
                if e.get("min_batch_allocation") is not None
            }
            others = 0
            if max_group > 1:
                for other, seqs in q.env_sequences.items():
                    if other == env_id:
                        continue
                    packed = -(-seqs // max_group) * max_group
                    others += max(0, packed - mins.get(other, 0))
            return {
                "current_step": self.step,
                "queue_size": (own + others) // env_group,
                "unallocated_fraction": 1.0 - min(total_min, 1.0),
                "self_queue_size": own // env_group,
                "max_group_size": max_group,
                "env_weight": weight,
            }

    # ------------------------------------------------------------------ shared
    def info(self) -> dict[str, Any]:
        reg = self.registration
        if reg is None:
            return {"batch_size": -1, "max_token_len": -1}
        return {"batch_size": reg["batch_size"], "max_token_len": reg["max_token_len"]}

    def wandb_info(self) -> dict[str, Any]:
        reg = self.registration
        if reg is None:
            return {"group": None, "project": None}
        return {"group": reg.get("wandb_group"), "project": reg.get("wandb_project")}

    def status(self) -> dict[str, Any]:
        with self.lock:
            drops_by_env: Counter = Counter()
            drops_by_bucket: Counter = Counter()
            for (env, bucket), n in self.stale_drops.items():
                drops_by_env[env] += n
                drops_by_bucket[bucket] += n
            return {
                "current_step": self.step,
                "queue_size": len(self.queue),
                "queued_sequences": self.queue.total_sequences,
                "buffered_sequences": self.buffered_sequences(),
                "registered": self.registration is not None,
                "started": self.started,
                "pending_batch": self.pending.batch_id if self.pending else None,
                "blocked_by": self.blocked_by,
                "max_staleness": self.settings.max_staleness,
                "stale_dropped_by_env": dict(drops_by_env),
                "stale_dropped_by_length": dict(drops_by_bucket),
            }

    def latest_example(self) -> bytes:
        with self.lock:
            if self.latest_seq is not None:
                try:
                    return self.store.get_blobs([self.latest_seq])[0]
                except KeyError:
                    pass  # pruned from history: answer like Atropos before any data
            return orjson.dumps(EMPTY_EXAMPLE)

    def peek(self, limit: int, after: Optional[int], env: Optional[str]) -> bytes:
        with self.lock:
            rows = self.store.peek(limit, after, env)
            pending = set(self.pending.seqs) if self.pending else set()
        parts = []
        for r in rows:
            state = r.state
            if state == DELIVERED and r.seq not in pending:  # pragma: no cover - defensive
                state = ACKED
            head = orjson.dumps(
                {"seq": r.seq, "received_at": r.received_at, "env_name": r.env_name, "state": state}
            )
            parts.append(head[:-1] + b',"group":' + r.blob + b"}")
        next_seq = rows[-1].seq if rows else (after if after is not None else self.next_seq - 1)
        return b'{"groups":[' + b",".join(parts) + b'],"next_seq":' + str(next_seq).encode() + b"}"

    def reset(self) -> None:
        with self.lock:
            self.store.reset()
            self._clear()
            self._update_gauges()
            logger.warning("run reset: queue, registration, envs and step cleared")


__all__ = ["EMPTY_EXAMPLE", "IncomingGroup", "RunService"]

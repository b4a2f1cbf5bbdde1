"""The run's state and rules (registration, envs, batches, acks), independent of HTTP.

``RunService`` keeps the working state in memory (a ``QueueIndex``, the envs, the step) and writes
every change through the store in one atomic ``Mutation`` *before* the route answers, so a 200 means
committed. On start it rebuilds itself from ``store.load()``. Memory never runs ahead of disk: a
state change is made in memory only once its commit went through, and where a method has to build
its change in memory first (a batch formed from the queue), a failed commit (``_commit``) rebuilds
the whole state from the store, which rolled the change back, before the fault is answered (500). All methods take one lock. Ingest
lives in ``intake.IngestMixin``, the read-only views in ``views.ViewsMixin``, explicit-ack delivery in
``delivery.DeliveryMixin``; the state they share is declared in ``run_state.RunState`` and the envs
are an ``env_registry.EnvRegistry`` (typed records, one 404 for an unknown env). Methods answer
with the wire models of ``type_definitions`` (``RegisterResponse``, ``Status``, ...), which the
routes declare as their ``response_model``; ``/batch``, ``/peek`` and ``/latest_example`` answer
with pre-serialised bytes (stored payloads are never parsed to be sent).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import uuid
from collections import Counter
from typing import Optional

from atroposlib.api.delivery import DeliveryMixin
from atroposlib.api.env_registry import EnvRegistry
from atroposlib.api.http import ApiProblem
from atroposlib.api.intake import IncomingGroup, IngestMixin
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.packing import GroupMeta, QueueIndex, length_bucket
from atroposlib.api.run_identity import run_label, same_run, undelivered
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store.base import (
    ACKED,
    BUFFERED,
    DELIVERED,
    DROPPED,
    QUEUED,
    BatchRecord,
    Mutation,
    Store,
)
from atroposlib.api.views import EMPTY_EXAMPLE, ViewsMixin
from atroposlib.api.wire import BatchBody
from atroposlib.type_definitions import (
    BatchAckResponse,
    DisconnectEnvResponse,
    RegisterEnv,
    RegisterEnvResponse,
    RegisterResponse,
    Registration,
)

logger = logging.getLogger("atroposlib.api")


class RunService(IngestMixin, ViewsMixin, DeliveryMixin):
    """The run: its state is declared in ``RunState`` (inherited through the mixins), the envs are
    an ``EnvRegistry`` of typed records."""

    def __init__(self, settings: ApiSettings, store: Store, metrics: ApiMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.lock = threading.RLock()
        self._acks_since_prune = 0
        self.repaired_fields: Counter[str] = Counter()  # kept across /reset (process-wide counts)
        self.env_groups: Counter[tuple[str, str]] = Counter()  # process-wide, as the metrics
        self._load()

    # ------------------------------------------------------------------ state
    def _clear(self) -> None:
        self.registration: Optional[Registration] = None
        self.step = 0
        self.started = False
        self.envs = EnvRegistry()
        self.queue = QueueIndex()
        self.buffers: dict[int, list[GroupMeta]] = {}
        self.pending: Optional[BatchRecord] = None
        self.pending_metas: dict[int, GroupMeta] = {}  # the outstanding batch's groups
        self.redeliver = False
        self.ack_mode_explicit = False
        self.quarantined = 0
        self.group_ids: dict[str, int] = {}  # group_id -> seq, oldest first (dedup window)
        self.next_seq = 1
        self.next_order = 1
        self.latest_seq: Optional[int] = None
        self.stale_drops: Counter[tuple[str, str]] = Counter()
        self.blocked_by: Optional[str] = None

    def _load(self) -> None:
        self._clear()
        snap = self.store.load()
        stored = snap.meta.get("registration")
        self.registration = Registration.model_validate(stored) if stored is not None else None
        self.step = int(snap.meta.get("step", 0))
        self.started = bool(snap.meta.get("started", False))
        self.latest_seq = snap.meta.get("latest_seq")
        self.ack_mode_explicit = bool(snap.meta.get("ack_mode_explicit", False))
        self.quarantined = int(snap.meta.get("quarantined", 0))
        self.stale_drops = Counter({(e, b): n for e, b, n in snap.meta.get("stale_drops", [])})
        self.envs = EnvRegistry.from_dicts(snap.envs)
        self.group_ids = snap.group_ids
        self.next_seq = snap.max_seq + 1
        self.next_order = snap.max_order + 1
        pending_seqs = set(snap.pending_batch.seqs) if snap.pending_batch else set()
        for row in snap.live_groups:
            if row.state == BUFFERED and row.meta.env_id is not None:
                self.buffers.setdefault(row.meta.env_id, []).append(row.meta)
            elif row.state == DELIVERED and row.meta.seq in pending_seqs:
                self.pending_metas[row.meta.seq] = row.meta
            else:
                self.queue.add(row.meta)
        if snap.pending_batch is not None:
            self.pending = snap.pending_batch
            self.redeliver = True  # a restart puts the unacknowledged batch back for redelivery
        self._update_gauges()
        if self.registration or len(self.queue) or self.pending:
            # whether this run is resumed or discarded is decided (and said) by run_identity
            logger.debug(
                "loaded run: step %d, %d queued groups, %d buffered, pending batch: %s",
                self.step,
                len(self.queue),
                sum(len(b) for b in self.buffers.values()),
                self.pending.batch_id if self.pending else None,
            )

    def _commit(self, m: Mutation) -> None:
        """``store.commit(m)``; when it fails, memory is rebuilt from the store (which applied none
        of ``m``), so that nothing the failed request changed in memory outlives it."""
        try:
            self.store.commit(m)
        except BaseException:
            logger.error("a commit failed; the run in memory is reloaded from the store")
            self._load()
            raise

    def _update_gauges(self) -> None:
        m = self.metrics
        m.queue_groups.set(len(self.queue))
        m.queue_sequences.set(self.queue.total_sequences)
        m.buffered_sequences.set(self.buffered_sequences())
        m.current_step.set(self.step)

    # ------------------------------------------------------------------ trainer side
    def register(self, reg: Registration) -> RegisterResponse:
        with self.lock:
            m = Mutation()
            if self.registration is not None and not same_run(self.registration, reg):
                if undelivered(self):  # never feed a new run the old run's groups
                    raise ApiProblem(
                        409,
                        f"this API holds another run ({run_label(self.registration)}) with "
                        f"{undelivered(self)} undelivered group(s); register that run, or start "
                        "run-api with --fresh (or POST /reset) to begin a new one",
                    )
                logger.warning(  # Atropos's first-/register-wins: nothing of the old run is fed
                    "a different run registered (%s) while %s is held; keeping the held "
                    "registration (first /register wins)",
                    run_label(reg),
                    run_label(self.registration),
                )
            if self.registration is None:  # Atropos: only the first /register initializes the run
                m.meta.update(registration=reg.model_dump(), step=reg.starting_step, started=False)
                self._commit(m)  # first on disk, then in memory
                self.registration = reg
                self.step = reg.starting_step
                self.started = False
            if self.pending is not None:  # a (re)starting trainer gets the unacked batch again
                self.redeliver = True
            self._update_gauges()
            return RegisterResponse(uuid=secrets.randbits(52))

    def _require_registration(self) -> Registration:
        if self.registration is None:
            raise ApiProblem(409, "no trainer has registered yet: POST /register first")
        return self.registration

    def get_batch(self) -> bytes:
        """The body of ``GET /batch``: a redelivered or new batch, or ``{"batch": null}``."""
        return bytes(self.get_batch_body())

    def get_batch_body(self, explicit_ack: bool = False) -> BatchBody:
        """``get_batch`` as the pieces of its body (see ``BatchBody``). With ``explicit_ack``
        (or once the run has seen an explicit ack) an unacknowledged batch is delivered again
        instead of being acknowledged implicitly (see ``delivery``)."""
        t0 = time.perf_counter()
        with self.lock:
            reg = self._require_registration()
            m = Mutation()
            if not self.started:
                self.started = True
                m.meta["started"] = True
            if self.pending is not None and self.explicit_acks(explicit_ack):
                self.redeliver = True  # never acked: deliver it again rather than drop it
            if self.pending is not None:
                if self.redeliver:
                    blobs, bad = self._verified_payloads(self.pending.seqs)
                    if not bad:
                        self.redeliver = False
                        if m.meta:
                            self._commit(m)
                        self.metrics.redeliveries.inc()
                        body = BatchBody.of(self.pending.batch_id, self.pending.step, blobs)
                        self.metrics.bytes_out.inc(body.nbytes)
                        return body
                    self._retire_undeliverable(m, bad)
                else:  # implicit ack (Atropos): the same session asks for more
                    self._ack_into(m, self.pending)
            self._drop_stale(m)
            batch_size = reg.batch_size
            while True:
                result = self.queue.form_batch(batch_size, self._min_sequences(batch_size))
                self.blocked_by = result.blocked_by
                if result.seqs is None:
                    if m.meta or m.states or m.acked_batch:
                        self._commit(m)
                    self._update_gauges()
                    return BatchBody.empty(self.step)
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
            self._commit(m)
            self.pending_metas = {seq: self.queue.remove(seq) for seq in result.seqs}
            for meta in self.pending_metas.values():
                name = self._env_name(meta.env_id) or str(meta.env_id)
                self.env_groups[(name, "delivered")] += 1
                self.metrics.env_groups_out.labels(name).inc()
            self.step = record.step
            self.pending = record
            self.redeliver = False
            self.metrics.batches_out.inc()
            self.metrics.groups_out.inc(len(result.seqs))
            self._update_gauges()
            body = BatchBody.of(record.batch_id, record.step, blobs)
            self.metrics.bytes_out.inc(body.nbytes)
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

    def _ack_into(self, m: Mutation, record: BatchRecord) -> None:
        m.acked_batch = record.batch_id
        for seq in record.seqs:
            m.states[seq] = ACKED
        self.pending = None
        self.pending_metas = {}
        self.redeliver = False
        self.metrics.acks.inc()
        self._acks_since_prune += 1
        if self._acks_since_prune >= 8:
            self._acks_since_prune = 0
            m.prune_below_seq = self.next_seq - self.settings.history_size
            self._forget_old_ids(m)

    def ack(self, batch_id: str) -> BatchAckResponse:
        with self.lock:
            if self.pending is not None and self.pending.batch_id == batch_id:
                step = self.pending.step
                m = Mutation()
                self._ack_into(m, self.pending)
                self._note_explicit_ack(m)
                self._commit(m)
                return BatchAckResponse(status="acked", batch_id=batch_id, step=step)
            known = self.store.batch_acked(batch_id)
            if known:
                if not self.ack_mode_explicit:
                    m = Mutation()
                    self._note_explicit_ack(m)
                    self._commit(m)
                return BatchAckResponse(status="acked", batch_id=batch_id, already_acked=True)
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
    def register_env(self, req: RegisterEnv) -> RegisterEnvResponse:
        with self.lock:
            if not self.started or self.registration is None:
                return RegisterEnvResponse(status="wait for trainer to start")
            self.envs.check_allocation(req)
            env = self.envs.new_record(req)
            self._commit(Mutation(envs=[env.to_dict()]))
            self.envs.put(env)
            reg = self.registration
            return RegisterEnvResponse(
                status="success",
                env_id=env.env_id,
                wandb_name=env.real_name,
                checkpoint_dir=reg.checkpoint_dir,
                starting_step=self.step,
                checkpoint_interval=reg.save_checkpoint_interval,
                num_steps=reg.num_steps,
            )

    def disconnect_env(self, env_id: int) -> DisconnectEnvResponse:
        """Atropos's /disconnect-env. An unknown env is the registry's 404 problem, answered as
        Atropos did (200 ``{"status": "failure", "error": ...}``): the one endpoint that does not
        answer 404 for it, because Atropos clients read that body."""
        with self.lock:
            try:
                env = EnvRegistry.disconnected(self.envs.get(env_id))
            except ApiProblem as unknown:
                return DisconnectEnvResponse(status="failure", error=unknown.error)
            # a disconnected env will not complete its mixed-size buffer: queue what it left there
            released = self.buffers.get(env_id, [])
            m = Mutation(envs=[env.to_dict()], states={g.seq: QUEUED for g in released})
            for i, meta in enumerate(released):
                m.orders[meta.seq] = self.next_order + i
            self._commit(m)
            self.buffers.pop(env_id, None)
            self.envs.put(env)
            for meta in released:
                meta.order = m.orders[meta.seq]
                self.queue.add(meta)
            self.next_order += len(released)
            self._update_gauges()
            return DisconnectEnvResponse(status="success")

    def reset(self, reason: Optional[str] = None) -> None:
        with self.lock:
            self.store.reset()
            self._clear()
            self._update_gauges()
            if reason is None:  # POST /reset
                logger.warning("run reset: queue, registration, envs and step cleared")
            else:  # a start-up decision, which run-api prints itself
                logger.info("run reset (%s): queue, registration, envs and step cleared", reason)


__all__ = ["EMPTY_EXAMPLE", "BatchBody", "IncomingGroup", "RunService"]

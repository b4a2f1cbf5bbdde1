"""Redelivery rules of the outstanding batch: explicit-ack sessions, verification, quarantine.

``DeliveryMixin`` is part of ``RunService``. Two rules live here:

* **Explicit ack.** Atropos trainers never ack: their next ``GET /batch`` implicitly acknowledges
  the previous batch. Once a trainer acknowledges explicitly (any ``POST /batch/ack`` in the run,
  persisted) or says it will (``X-Atropos-Ack: explicit`` on ``GET /batch``, which our client
  sends), an unacknowledged batch is never acknowledged implicitly: it is delivered again.
* **Quarantine.** A redelivered batch is checked first: each payload must be readable and parse as
  a JSON object. A payload that does not (stored by an older version, or damaged) is quarantined
  (state ``dropped``, logged with its seq and group_id, counted in ``/status.quarantined_groups``);
  the batch's good groups go back to the queue, the step goes back by one, and a new batch is
  formed. So a batch the trainer cannot read is retried once, never forever.
"""

from __future__ import annotations

import logging

import orjson

from atroposlib.api.packing import GroupMeta
from atroposlib.api.run_state import RunState
from atroposlib.api.store.base import DROPPED, QUEUED, Mutation
from atroposlib.api.wire import ACK_MODE_HEADER

logger = logging.getLogger("atroposlib.api")


def payload_is_deliverable(blob: bytes) -> bool:
    """True when ``blob`` parses (as every client parses it) into a JSON object."""
    try:
        return isinstance(orjson.loads(blob), dict)
    except orjson.JSONDecodeError:
        return False


class DeliveryMixin(RunState):
    """Explicit-ack redelivery and quarantine of undeliverable payloads (see module docstring)."""

    def explicit_acks(self, requested: bool) -> bool:
        """Whether an unacknowledged batch must be redelivered instead of implicitly acked."""
        return requested or bool(self.ack_mode_explicit)

    def _note_explicit_ack(self, m: Mutation) -> None:
        if not self.ack_mode_explicit:
            self.ack_mode_explicit = True
            m.meta["ack_mode_explicit"] = True

    def _verified_payloads(self, seqs: list[int]) -> tuple[list[bytes], list[int]]:
        """Payloads of ``seqs`` and the seqs that cannot be delivered (unreadable or not JSON)."""
        blobs, missing = self._read_payloads(seqs)
        if missing:
            return blobs, missing
        bad = [s for s, b in zip(seqs, blobs, strict=True) if not payload_is_deliverable(b)]
        return blobs, bad

    def _retire_undeliverable(self, m: Mutation, bad: list[int]) -> None:
        """Quarantine ``bad`` seqs of the pending batch, requeue its other groups, roll the step
        back by one (the batch was never trained), and forget the batch."""
        record = self.pending
        assert record is not None
        m.acked_batch = record.batch_id  # retired: never offered again under this id
        back: list[GroupMeta] = []
        for seq in record.seqs:
            meta = self.pending_metas.get(seq)
            if seq in bad or meta is None:
                m.states[seq] = DROPPED
                continue
            meta.order = self.next_order
            self.next_order += 1
            m.states[seq] = QUEUED
            m.orders[seq] = meta.order
            back.append(meta)
        for seq in bad:
            gid = self.pending_metas[seq].group_id if seq in self.pending_metas else None
            logger.error(
                "quarantined group %d (group_id %s) of batch %s: its stored payload cannot be "
                "delivered (unreadable or not valid JSON); %d other group(s) go back to the queue",
                seq,
                gid,
                record.batch_id,
                len(back),
            )
        self.quarantined += len(bad)
        self.metrics.quarantined.inc(len(bad))
        m.meta["quarantined"] = self.quarantined
        if self.step == record.step:
            self.step = record.step - 1
            m.meta["step"] = self.step
        for meta in back:
            self.queue.add(meta)
        self.pending = None
        self.pending_metas = {}
        self.redeliver = False

    def _forget_old_ids(self, m: Mutation) -> None:
        """Bound a long run: ids (and acked/dropped rows) older than the dedup window go."""
        cutoff = self.next_seq - self.settings.dedup_window
        if cutoff <= 1:
            return
        m.forget_below_seq = cutoff
        ids = self.group_ids
        while ids:
            gid = next(iter(ids))
            if ids[gid] >= cutoff:
                break
            del ids[gid]


__all__ = ["ACK_MODE_HEADER", "DeliveryMixin", "payload_is_deliverable"]

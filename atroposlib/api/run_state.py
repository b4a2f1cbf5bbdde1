"""The declared in-memory state of a run, shared by ``RunService`` and the parts it is built from.

``RunState`` only declares (types and meaning); ``RunService._clear`` gives every field its empty
value and ``RunService._load`` fills them from the store. ``IngestMixin``, ``ViewsMixin`` and
``DeliveryMixin`` inherit it so that what they read and write is declared in one place.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Literal, Optional

from atroposlib.api.env_registry import EnvRegistry
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.packing import GroupMeta, QueueIndex
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store.base import BatchRecord, Mutation, Store
from atroposlib.type_definitions import Registration


class RunState:
    """What a running ``RunService`` holds (all of it guarded by ``lock``)."""

    settings: ApiSettings
    store: Store
    metrics: ApiMetrics
    lock: threading.RLock
    registration: Optional[Registration]  # the trainer's /register body (first one wins)
    step: int  # the step of the last batch handed out
    started: bool  # the trainer asked for its first /batch (envs may register from then on)
    envs: EnvRegistry
    queue: QueueIndex  # groups ready to be batched
    buffers: dict[int, list[GroupMeta]]  # per env: groups smaller than its group_size, waiting
    pending: Optional[BatchRecord]  # the batch handed out and not yet acknowledged
    pending_metas: dict[int, GroupMeta]  # that batch's groups, by seq
    redeliver: bool  # hand ``pending`` out again on the next /batch
    ack_mode_explicit: bool  # the run has seen an explicit ack: never ack implicitly again
    quarantined: int  # groups retired because their payload could not be delivered
    group_ids: dict[str, int]  # group_id -> seq, oldest first (the dedup window)
    next_seq: int
    next_order: int
    latest_seq: Optional[int]  # the newest queued group (/latest_example)
    stale_drops: Counter[
        tuple[str, str]
    ]  # (env name, length bucket) -> groups dropped as too stale
    blocked_by: Optional[str]  # why the last /batch came back empty
    env_groups: Counter[tuple[str, str]]  # (env name, received|delivered) -> groups, this process
    repaired_fields: Counter[
        str
    ]  # Atropos field repairs done at ingest, by field (kept across /reset)

    def buffered_sequences(self) -> int:
        """Sequences held in the mixed-size env buffers."""
        return sum(g.n for b in self.buffers.values() for g in b)

    def ack_mode(self) -> Literal["implicit", "explicit"]:
        """``explicit`` once the run has seen an explicit ack (see ``delivery``)."""
        return "explicit" if self.ack_mode_explicit else "implicit"

    def _env_name(self, env_id: Optional[int]) -> Optional[str]:
        return self.envs.name(env_id)

    def _min_sequences(self, batch_size: int) -> dict[Optional[int], int]:
        return self.envs.min_sequences(batch_size, self.settings.batch_shares == "weight")

    def _shares(self) -> dict[Optional[int], float]:
        return self.envs.shares(self.settings.batch_shares == "weight")

    # What one part calls and another defines (``RunService`` or a mixin), declared here so that
    # every call is checked against one signature.
    def _update_gauges(self) -> None:
        """Bring the queue/step gauges up to date."""
        raise NotImplementedError

    def _commit(self, m: Mutation) -> None:
        """Commit ``m``; on failure the state in memory is rebuilt from the store."""
        raise NotImplementedError

    def _read_payloads(self, seqs: list[int]) -> tuple[list[bytes], list[int]]:
        """Payloads of ``seqs`` and the seqs whose payload is unreadable."""
        raise NotImplementedError

    def reset(self, reason: Optional[str] = None) -> None:
        """Discard the run (store and state); ``reason`` None is ``POST /reset``."""
        raise NotImplementedError


__all__ = ["RunState"]

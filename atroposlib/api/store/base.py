"""The store interface: what the trajectory API persists, and how (one atomic ``commit`` per change).

The server keeps its working state (queue index, envs, step) in memory and writes every change
through ``Store.commit(Mutation)`` before it answers; ``load()`` rebuilds that state after a restart.
Group payloads are opaque compact JSON bytes (``blob``) that are never re-parsed on the way out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.api.packing import GroupMeta

QUEUED, BUFFERED, DELIVERED, ACKED, DROPPED = "queued", "buffered", "delivered", "acked", "dropped"
LIVE_STATES = (QUEUED, BUFFERED, DELIVERED)


@dataclass
class GroupRow:
    """A stored group's metadata and lifecycle state."""

    meta: GroupMeta
    state: str
    env_name: Optional[str] = None


@dataclass
class BatchRecord:
    """A batch handed (or about to be handed) to the trainer; redelivered until acknowledged."""

    batch_id: str
    step: int
    seqs: list[int]
    created_at: float = 0.0


@dataclass
class Mutation:
    """Everything one request changes; a store applies it atomically (all or nothing)."""

    meta: dict[str, Any] = field(default_factory=dict)
    envs: list[dict[str, Any]] = field(default_factory=list)
    new_groups: list[tuple[GroupRow, Any]] = field(default_factory=list)  # (row, staged payload)
    states: dict[int, str] = field(default_factory=dict)
    orders: dict[int, int] = field(default_factory=dict)  # seq -> queue-entry order
    new_batch: Optional[BatchRecord] = None
    acked_batch: Optional[str] = None
    prune_below_seq: Optional[int] = None
    forget_below_seq: Optional[int] = None  # delete acked/dropped rows below this seq


@dataclass
class Snapshot:
    """What ``load()`` returns: the run as it was at the last commit."""

    meta: dict[str, Any] = field(default_factory=dict)
    envs: list[dict[str, Any]] = field(default_factory=list)
    live_groups: list[GroupRow] = field(default_factory=list)
    pending_batch: Optional[BatchRecord] = None
    group_ids: dict[str, int] = field(default_factory=dict)  # group_id -> seq, in seq order
    max_seq: int = 0
    max_order: int = 0


@dataclass
class PeekRow:
    seq: int
    received_at: float
    env_name: Optional[str]
    state: str
    blob: bytes


class Store(ABC):
    """Persistence behind the API. Implementations: ``MemoryStore`` and ``SqliteStore``."""

    durable: bool = False

    @abstractmethod
    def load(self) -> Snapshot: ...

    def stage(self, blob: bytes) -> Any:
        """Write a payload ahead of the commit that references it (may run outside the API's lock,
        concurrently with other requests); the handle goes into ``Mutation.new_groups``."""
        return blob

    @abstractmethod
    def commit(self, mutation: Mutation) -> None: ...

    @abstractmethod
    def get_blobs(self, seqs: Sequence[int]) -> list[bytes]:
        """Payloads in the order of ``seqs`` (KeyError if one is missing)."""

    @abstractmethod
    def peek(self, limit: int, after: Optional[int], env_name: Optional[str]) -> list[PeekRow]:
        """Up to ``limit`` groups with a payload, ``seq > after`` (or the newest), ascending."""

    @abstractmethod
    def batch_acked(self, batch_id: str) -> Optional[bool]:
        """True/False for a known batch, None for an unknown id."""

    @abstractmethod
    def reset(self) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


__all__ = [
    "ACKED",
    "BUFFERED",
    "BatchRecord",
    "DELIVERED",
    "DROPPED",
    "GroupRow",
    "LIVE_STATES",
    "Mutation",
    "PeekRow",
    "QUEUED",
    "Snapshot",
    "Store",
]

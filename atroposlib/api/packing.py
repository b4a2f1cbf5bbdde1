"""Batch formation: which queued groups make the next batch (pure in-memory logic, no I/O).

The packing rule (also in docs/api.md):

* A batch holds **exactly** ``batch_size`` sequences, made of whole groups of any sizes.
* Groups are considered **oldest first**, by the order in which they entered the queue (``order``;
  a group held in a mixed-size buffer enters when it is released). At every pick the oldest group
  is taken whose size still leaves a remainder that the *other* queued groups can fill exactly; a
  group that would make an exact batch impossible is skipped for this batch (it stays queued, in
  order). So a batch is formed whenever *any* subset of the queue sums to ``batch_size``, and the
  oldest group is always in it when some exact batch contains it.
* ``min_batch_allocation``: before that, every connected env with an allocation ``a`` gets at least
  ``int(a * batch_size)`` sequences, picked oldest first among its own groups under the same
  exactness check (envs in id order; the minimums are capped at what is left of the batch). If such
  an env cannot supply its minimum, no batch is formed yet (``blocked_by`` says which env).

Cost per batch: the queue is indexed by group size (and by env and size); a feasibility check is a
bounded subset-sum over the *distinct* group sizes done with an integer bitset, so forming a batch
costs O(picks x distinct sizes x log) and does not depend on how deep the queue is.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional


@dataclass(slots=True)
class GroupMeta:
    """What packing needs to know about a stored group (the payload stays in the store)."""

    seq: int
    n: int
    env_id: Optional[int] = None
    policy_version: Optional[int] = None
    max_len: int = 0
    nbytes: int = 0
    group_id: Optional[str] = None
    received_at: float = 0.0
    order: int = 0  # queue-entry order (FIFO key); assigned when the group enters the queue


def reachable_sums(counts: Mapping[int, int], limit: int) -> int:
    """Bitset of the totals <= ``limit`` reachable with at most ``counts[s]`` groups of size ``s``."""
    if limit < 0:
        return 0
    mask = (1 << (limit + 1)) - 1
    bits = 1
    for size, count in counts.items():
        if count <= 0 or size <= 0 or size > limit:
            continue
        count = min(count, limit // size)
        chunk = 1
        while count > 0:  # binary splitting of a bounded count
            take = min(chunk, count)
            bits |= (bits << (size * take)) & mask
            count -= take
            chunk <<= 1
    return bits


def can_make(counts: Mapping[int, int], target: int) -> bool:
    """True when some multiset of the available group sizes sums to exactly ``target``."""
    if target == 0:
        return True
    if target < 0:
        return False
    return bool((reachable_sums(counts, target) >> target) & 1)


def pick_exact_subset(sizes: Sequence[int], target: int) -> Optional[list[int]]:
    """Indices (oldest first) of a subset of ``sizes`` summing to ``target``, preferring old items.

    Used for the per-env buffer of smaller-than-registered groups (Atropos's mixed-size buffer).
    """
    counts = Counter(sizes)
    if not can_make(counts, target):
        return None
    chosen: list[int] = []
    remaining = target
    for i, size in enumerate(sizes):
        counts[size] -= 1
        if size <= remaining and can_make(counts, remaining - size):
            chosen.append(i)
            remaining -= size
            if remaining == 0:
                return chosen
    return None  # unreachable: can_make guaranteed a solution


def length_bucket(max_len: int) -> str:
    """Power-of-two bucket of a group's longest sequence, for staleness accounting ("<=512")."""
    if max_len <= 256:
        return "<=256"
    return f"<={1 << math.ceil(math.log2(max_len))}"


@dataclass
class PackResult:
    """Outcome of ``QueueIndex.form_batch``: the chosen groups, or why none could be formed."""

    seqs: Optional[list[int]]
    blocked_by: Optional[str] = None


@dataclass
class QueueIndex:
    """Queued groups indexed by size, by (env, size) and by policy version; removal is O(1)."""

    groups: dict[int, GroupMeta] = field(default_factory=dict)
    size_counts: Counter[int] = field(default_factory=Counter)  # groups by sequence count
    env_sequences: Counter[Optional[int]] = field(default_factory=Counter)
    env_size_counts: dict[Optional[int], Counter[int]] = field(default_factory=dict)
    total_sequences: int = 0
    total_bytes: int = 0
    length_counts: Counter[str] = field(default_factory=Counter)  # groups by length bucket
    _by_size: dict[int, deque[int]] = field(default_factory=dict)
    _by_env_size: dict[Optional[int], dict[int, deque[int]]] = field(default_factory=dict)
    _by_version: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.groups)

    def __contains__(self, seq: int) -> bool:
        return seq in self.groups

    def add(self, meta: GroupMeta) -> None:
        """Queue a group; ``order`` must grow from one add to the next (FIFO by queue entry)."""
        self.groups[meta.seq] = meta
        self._by_size.setdefault(meta.n, deque()).append(meta.seq)
        self._by_env_size.setdefault(meta.env_id, {}).setdefault(meta.n, deque()).append(meta.seq)
        self.size_counts[meta.n] += 1
        self.env_size_counts.setdefault(meta.env_id, Counter())[meta.n] += 1
        self.env_sequences[meta.env_id] += meta.n
        self.total_sequences += meta.n
        self.total_bytes += meta.nbytes
        self.length_counts[length_bucket(meta.max_len)] += 1
        if meta.policy_version is not None:
            heapq.heappush(self._by_version, (meta.policy_version, meta.seq))

    def remove(self, seq: int) -> GroupMeta:
        """Unqueue a group; its index entries are discarded lazily when they reach a head."""
        meta = self.groups.pop(seq)
        self.size_counts[meta.n] -= 1
        if self.size_counts[meta.n] == 0:
            del self.size_counts[meta.n]
        env_counts = self.env_size_counts[meta.env_id]
        env_counts[meta.n] -= 1
        if env_counts[meta.n] == 0:
            del env_counts[meta.n]
        self.env_sequences[meta.env_id] -= meta.n
        if self.env_sequences[meta.env_id] == 0:
            del self.env_sequences[meta.env_id]
        self.total_sequences -= meta.n
        self.total_bytes -= meta.nbytes
        bucket = length_bucket(meta.max_len)
        self.length_counts[bucket] -= 1
        if self.length_counts[bucket] == 0:
            del self.length_counts[bucket]
        self._trim(self._by_size.get(meta.n))
        self._trim(self._by_env_size.get(meta.env_id, {}).get(meta.n))
        if len(self._by_version) > 64 and len(self._by_version) > 4 * len(self.groups):
            self._by_version = [
                (m.policy_version, m.seq)
                for m in self.groups.values()
                if m.policy_version is not None
            ]
            heapq.heapify(self._by_version)
        return meta

    def _trim(self, dq: Optional[deque[int]]) -> None:
        while dq and dq[0] not in self.groups:
            dq.popleft()

    def oldest(self, env_id: Optional[int]) -> Optional[GroupMeta]:
        """The env's longest-queued group (heads of its per-size deques; O(distinct sizes))."""
        heads = []
        for dq in self._by_env_size.get(env_id, {}).values():
            self._trim(dq)
            if dq:
                heads.append(self.groups[dq[0]])
        return min(heads, key=lambda m: (m.order, m.seq), default=None)

    def max_group_size(self) -> int:
        return max(self.size_counts, default=1)

    def pop_stale(self, min_version: int) -> list[GroupMeta]:
        """Remove and return queued groups whose ``policy_version`` is below ``min_version``."""
        dropped: list[GroupMeta] = []
        heap = self._by_version
        while heap and heap[0][0] < min_version:
            _, seq = heapq.heappop(heap)
            if seq in self.groups:
                dropped.append(self.remove(seq))
        return dropped

    def _alive(self, dq: deque[int], chosen: set[int]) -> Iterator[int]:
        for seq in dq:
            if seq in self.groups and seq not in chosen:
                yield seq

    def form_batch(self, batch_size: int, min_sequences: Mapping[Optional[int], int]) -> PackResult:
        """Choose groups for one batch of exactly ``batch_size`` sequences (see module docstring).

        Nothing is removed here; the caller removes the returned seqs once the batch is committed.
        """
        if batch_size <= 0 or self.total_sequences < batch_size:
            return PackResult(None, "not enough queued sequences")
        counts: dict[int, int] = dict(self.size_counts)
        if not can_make(counts, batch_size):
            return PackResult(None, "no combination of queued group sizes makes batch_size")
        chosen: list[int] = []
        chosen_set: set[int] = set()
        remaining = batch_size

        def take_from(deques: Mapping[int, deque[int]], need: int) -> int:
            nonlocal remaining
            got = 0
            iters = {size: self._alive(dq, chosen_set) for size, dq in deques.items()}
            heads = {size: next(it, None) for size, it in iters.items()}
            while got < need and remaining > 0:
                pick = None
                live = [(self.groups[s].order, s, z) for z, s in heads.items() if s is not None]
                for _, seq, size in sorted(live):
                    if size > remaining:
                        continue
                    counts[size] -= 1
                    if can_make(counts, remaining - size):
                        pick = (seq, size)
                        break
                    counts[size] += 1
                if pick is None:
                    break
                seq, size = pick
                chosen.append(seq)
                chosen_set.add(seq)
                remaining -= size
                got += size
                heads[size] = next(iters[size], None)
            return got

        for env_id in sorted(min_sequences, key=lambda e: (e is None, e if e is not None else 0)):
            need = min(min_sequences[env_id], remaining)
            if need <= 0:
                continue
            got = take_from(self._by_env_size.get(env_id, {}), need)
            if got < need:
                return PackResult(
                    None, f"env {env_id} cannot fill its min_batch_allocation ({need})"
                )
        take_from(self._by_size, remaining)
        if remaining != 0:  # pragma: no cover - the feasibility checks make this unreachable
            return PackResult(None, "packing failed")
        return PackResult(chosen)


__all__ = [
    "GroupMeta",
    "PackResult",
    "QueueIndex",
    "can_make",
    "length_bucket",
    "pick_exact_subset",
    "reachable_sums",
]

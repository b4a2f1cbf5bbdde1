"""Atropos's queue-packing helpers (``atroposlib.api.utils``), over plain lists of group dicts.

The service itself packs batches with ``packing`` (durable store, per-env buffers); these pure
functions keep Atropos's signatures for code and tests that call them directly. A group's size is
``len(group["tokens"])``; groups are never split; a batch is exactly ``batch_size`` sequences or
nothing (``(None, queue)`` with the queue unchanged).

Groups smaller than the largest group in the queue are taken only in bundles that add up to that
largest size (e.g. two groups of 4 where groups of 8 exist), as Atropos does, so that every env's
sequences are packed in whole units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.api.packing import pick_exact_subset

Group = dict[str, Any]


def _size(group: Group) -> int:
    return len(group.get("tokens", []))


def find_groups_summing_to_target(buffer: Sequence[Group], target_size: int) -> list[int]:
    """Indices (oldest first) of groups whose sizes add up to exactly ``target_size``; the oldest
    groups that fit are preferred (FIFO), and ``[]`` means impossible."""
    if not buffer or target_size <= 0:
        return []
    total, picked = 0, []
    for i, group in enumerate(buffer):
        if total + _size(group) <= target_size:
            picked.append(i)
            total += _size(group)
            if total == target_size:
                return picked
    return pick_exact_subset([_size(g) for g in buffer], target_size) or []


def _bundles(indexed: Sequence[tuple[int, Group]], unit: int) -> list[list[int]]:
    """Queue indices grouped into bundles of ``unit`` sequences, each made of same-size groups,
    in the order the bundles complete."""
    pending: dict[int, list[int]] = {}
    out: list[list[int]] = []
    for i, group in indexed:
        size = _size(group)
        pending.setdefault(size, []).append(i)
        if size * len(pending[size]) == unit:
            out.append(pending.pop(size))
    return out


def _take(queue: list[Group], chosen: list[int]) -> tuple[list[Group], list[Group]]:
    keep = set(chosen)
    return [queue[i] for i in chosen], [g for i, g in enumerate(queue) if i not in keep]


def grab_exact_from_heterogeneous_queue(
    queue: list[Group], batch_size: int
) -> tuple[Optional[list[Group]], list[Group]]:
    """``(batch, rest)``: the first complete bundles adding up to exactly ``batch_size``."""
    if not queue or sum(_size(g) for g in queue) < batch_size:
        return None, queue
    unit = max(_size(g) for g in queue)
    chosen: list[int] = []
    total = 0
    for bundle in _bundles(list(enumerate(queue)), unit):
        chosen.extend(bundle)
        total += unit
        if total >= batch_size:
            break
    if total != batch_size:
        return None, queue
    return _take(queue, chosen)


def grab_batch_with_minimum_allocations(
    queue: list[Group], batch_size: int, env_configs: Sequence[dict[str, Any]]
) -> tuple[Optional[list[Group]], list[Group]]:
    """Like ``grab_exact_from_heterogeneous_queue``, but first gives every connected env with a
    ``min_batch_allocation`` (a fraction) at least that share of the batch (scaled down when the
    shares add up to more than the batch); no batch while such an env has nothing packable."""
    mins = {
        e["registered_id"]: float(e["min_batch_allocation"])
        for e in env_configs
        if e.get("connected", False) and e.get("min_batch_allocation") is not None
    }
    if not queue:
        return None, queue
    if not mins:
        return grab_exact_from_heterogeneous_queue(queue, batch_size)
    unit = max(_size(g) for g in queue)
    by_env: dict[Any, list[tuple[int, Group]]] = {}
    for i, g in enumerate(queue):
        by_env.setdefault(g.get("env_id"), []).append((i, g))
    bundles = {env: _bundles(items, unit) for env, items in by_env.items()}
    wanted = {env: int(batch_size * share) for env, share in mins.items()}
    wanted = {env: n for env, n in wanted.items() if n > 0}
    if any(not bundles.get(env) for env in wanted):
        return None, queue
    if sum(wanted.values()) > batch_size:
        scale = batch_size / sum(wanted.values())
        wanted = {env: max(unit, int(n * scale)) for env, n in wanted.items()}
    chosen: list[int] = []
    total = 0
    used: set[int] = set()
    for env, need in wanted.items():
        got = 0
        for bundle in bundles[env]:
            if got >= need or total + unit > batch_size:
                break
            chosen.extend(bundle)
            used.add(id(bundle))
            got += unit
            total += unit
    rest = sorted(
        (b for env_bundles in bundles.values() for b in env_bundles if id(b) not in used),
        key=lambda b: b[-1],
    )
    for bundle in rest:
        if total + unit > batch_size:
            break
        chosen.extend(bundle)
        total += unit
    if total != batch_size:
        return None, queue
    return _take(queue, sorted(chosen))


__all__ = [
    "find_groups_summing_to_target",
    "grab_batch_with_minimum_allocations",
    "grab_exact_from_heterogeneous_queue",
]

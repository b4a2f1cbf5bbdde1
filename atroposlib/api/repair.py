"""Repair of odd-but-harmless optional fields that Atropos accepted, before validation.

Atropos's API took any JSON for the optional fields; real clients (Atropos's own HTTP tests among
them) send ``"messages": []`` for a group that has sequences, or ``advantages`` whose lengths do not
match ``tokens``. Refusing such a group loses rollouts; training on it would pair numbers with the
wrong tokens. So the group is kept and only the malformed optional field is dropped (set to null:
the viewers then show no conversation, the trainer computes advantages itself), and the repair is
counted: ``/status`` ``repaired_fields`` per field, and one warning log line per field (the first
time; later repairs are only counted, so a misbehaving client cannot flood the log).

Required fields (``tokens``, ``masks``, ``scores``) are never repaired: their errors stay 422s.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

logger = logging.getLogger(__name__)

PER_TOKEN_OPTIONAL = ("advantages",)
"""Optional per-token fields dropped when their shape differs from ``tokens``."""


def _aligned(rows: Any, tokens: list[Any]) -> bool:
    if not isinstance(rows, list) or len(rows) != len(tokens):
        return False
    return all(
        isinstance(r, list) and isinstance(t, list) and len(r) == len(t)
        for r, t in zip(rows, tokens, strict=True)
    )


def repair_group(data: Any) -> list[str]:
    """Drop the malformed optional fields of one group dict in place; the names dropped.

    A body that is not a group (no ``tokens`` list) is left alone for validation to refuse."""
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        return []
    tokens = data["tokens"]
    dropped = []
    messages = data.get("messages")
    if isinstance(messages, list) and len(messages) != len(tokens):
        data["messages"] = None
        dropped.append("messages")
    for name in PER_TOKEN_OPTIONAL:
        rows = data.get(name)
        if rows is not None and not _aligned(rows, tokens):
            data[name] = None
            dropped.append(name)
    return dropped


def note_repairs(svc: Any, dropped: list[str], where: str = "") -> None:
    """Count ``dropped`` on the service (``/status`` ``repaired_fields``); log each field once."""
    if not dropped:
        return
    counts: Counter[str] = svc.repaired_fields
    with svc.lock:
        _count(counts, dropped, where)


def _count(counts: Counter[str], dropped: list[str], where: str) -> None:
    for name in dropped:
        if counts[name] == 0:
            logger.warning(
                "scored group%s: dropped malformed optional field %r (kept the group; further "
                "repairs are counted in /status repaired_fields, not logged)",
                f" {where}" if where else "",
                name,
            )
        counts[name] += 1


__all__ = ["PER_TOKEN_OPTIONAL", "note_repairs", "repair_group"]

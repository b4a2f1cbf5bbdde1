"""Which run the API holds, and whether a start-up or a ``/register`` continues it.

A ``run-api`` restarted on a data directory that holds an earlier run (a registration, queued or
buffered groups, an unacknowledged batch) does not pick it up silently: ``--resume`` continues it
(crash recovery), ``--fresh`` discards it, and with neither the command refuses to start and says
what it found (``start_decision``).

``/register`` from a trainer of a *different* run (``same_run``: its ``run_id`` when both sides
give one, else its wandb group and project, batch size and token limit) is refused with 409 while
the held run still has undelivered groups, so a new experiment is never fed the old run's data; when
nothing is left, Atropos's first-``/register``-wins rule applies (the call is answered, the held
registration stays, a warning is logged).
"""

from __future__ import annotations

from typing import Any, Optional

from atroposlib.api.run_state import RunState
from atroposlib.type_definitions import Registration

IDENTITY_KEYS = ("wandb_group", "wandb_project", "batch_size", "max_token_len")
START_MODES = ("resume", "fresh")


def run_label(reg: Registration) -> str:
    if reg.run_id:
        return f"run_id {reg.run_id!r}"
    return ", ".join(f"{k}={getattr(reg, k)!r}" for k in IDENTITY_KEYS)


def same_run(held: Registration, new: Registration) -> bool:
    """Whether registration ``new`` belongs to the run of registration ``held``."""
    if held.run_id and new.run_id:
        return held.run_id == new.run_id
    return all(getattr(held, k) == getattr(new, k) for k in IDENTITY_KEYS)


def held_run_summary(svc: RunState) -> Optional[str]:
    """A one-line description of the run ``svc`` holds, or None when it holds nothing."""
    with svc.lock:
        queued, buffered = len(svc.queue), sum(len(b) for b in svc.buffers.values())
        pending = svc.pending.batch_id if svc.pending else None
        reg = svc.registration
        if reg is None and not queued and not buffered and pending is None:
            return None
        parts = [f"step {svc.step}", f"{queued} queued group(s)", f"{buffered} buffered"]
        if pending is not None:
            parts.append("an unacknowledged batch")
        parts.append(f"trainer: {run_label(reg)}" if reg else "no trainer registered")
        return ", ".join(parts)


def undelivered(svc: RunState) -> int:
    """Groups the held run would still deliver (queued, buffered, or in the pending batch)."""
    pending = len(svc.pending.seqs) if svc.pending else 0
    return len(svc.queue) + sum(len(b) for b in svc.buffers.values()) + pending


def start_decision(svc: Any, mode: Optional[str], where: str) -> str:
    """Apply ``--resume`` / ``--fresh`` to what ``svc`` loaded; the line to print.

    Raises ``ValueError`` (the refusal, with what was found) when a run is held and no mode was
    chosen."""
    summary = held_run_summary(svc)
    if summary is None:
        return f"starting a new run in {where}"
    if mode == "resume":
        return f"resuming the run in {where}: {summary}"
    if mode == "fresh":
        svc.reset()
        return f"discarded the earlier run in {where} ({summary}); starting a new run"
    raise ValueError(
        f"{where} holds an earlier run ({summary}); pass --resume to continue it or --fresh to "
        "discard it and start a new run"
    )


__all__ = [
    "IDENTITY_KEYS",
    "START_MODES",
    "held_run_summary",
    "run_label",
    "same_run",
    "start_decision",
    "undelivered",
]

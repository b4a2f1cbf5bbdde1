"""Which run the API holds, and whether a start-up or a ``/register`` continues it.

A ``run-api`` started on a data directory that holds an earlier run decides by itself, so that the
same command brings a crashed server back (``start_decision``): a run that still holds undelivered
groups (queued, buffered, or in a batch handed out and not acknowledged) is resumed, and a run with
nothing left to deliver (it finished, or was drained) is discarded for a new one. ``--resume``
always continues whatever is held (its registration, step and envs too, even with nothing left to
deliver); ``--fresh`` always discards it.

``/register`` from a trainer of a *different* run (``same_run``: its ``run_id`` when both sides
give one, else its wandb group and project, batch size and token limit) is refused with 409 while
the held run still has undelivered groups, so a new experiment is never fed the old run's data; when
nothing is left, Atropos's first-``/register``-wins rule applies (the call is answered, the held
registration stays, a warning is logged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class HeldRun:
    """What a data directory holds of a run, as counts."""

    queued: int  # groups ready to be batched
    buffered: int  # groups waiting in an env's mixed-size buffer
    pending: Optional[int]  # groups of the batch handed out and not acknowledged (None: no batch)
    envs: int  # envs that registered
    step: int
    registration: Optional[Registration]

    @property
    def undelivered(self) -> int:
        """Groups a restart would lose if it discarded the run."""
        return self.queued + self.buffered + (self.pending or 0)

    @property
    def nothing(self) -> bool:
        """Nothing at all: a new or reset data directory."""
        return self.registration is None and not self.undelivered and not self.envs

    def describe(self) -> str:
        """One line: groups queued, buffered, the batch pending ack, envs, step, trainer."""
        batch = (
            "no batch pending ack"
            if self.pending is None
            else f"a batch of {_plural(self.pending, 'group')} pending ack"
        )
        trainer = run_label(self.registration) if self.registration else "none registered"
        return (
            f"{_plural(self.queued, 'group')} queued, {self.buffered} buffered, {batch}, "
            f"{_plural(self.envs, 'env')}, step {self.step}, trainer: {trainer}"
        )


def held_run(svc: RunState) -> HeldRun:
    """The counts of the run ``svc`` holds."""
    with svc.lock:
        return HeldRun(
            queued=len(svc.queue),
            buffered=sum(len(b) for b in svc.buffers.values()),
            pending=len(svc.pending.seqs) if svc.pending else None,
            envs=len(svc.envs),
            step=svc.step,
            registration=svc.registration,
        )


def undelivered(svc: RunState) -> int:
    """Groups the held run would still deliver (queued, buffered, or in the pending batch)."""
    pending = len(svc.pending.seqs) if svc.pending else 0
    return len(svc.queue) + sum(len(b) for b in svc.buffers.values()) + pending


def start_decision(svc: RunState, mode: Optional[str], where: str) -> str:
    """Resume or discard the run ``svc`` loaded from ``where``; the one line that says which.

    ``mode`` None: resume when it holds undelivered groups, else start a new run (discarding the
    registration, step and envs of the earlier one). ``"resume"`` / ``"fresh"``: always that."""
    if mode not in (None, *START_MODES):
        raise ValueError(f"start mode must be resume or fresh, not {mode!r}")
    held = held_run(svc)
    if held.nothing:
        return f"starting a new run in {where}"
    if mode == "fresh":
        svc.reset(reason="--fresh")
        return f"discarded the run held in {where} ({held.describe()}); starting a new run"
    if mode == "resume":
        return f"resuming the run in {where}: {held.describe()}"
    if held.undelivered:
        return f"resuming the run in {where}: {held.describe()} (--fresh discards it)"
    svc.reset(reason="nothing left to deliver")
    return (
        f"starting a new run in {where}: the run held there had nothing left to deliver "
        f"({held.describe()}; --resume keeps it)"
    )


__all__ = [
    "IDENTITY_KEYS",
    "START_MODES",
    "HeldRun",
    "held_run",
    "run_label",
    "same_run",
    "start_decision",
    "undelivered",
]

"""The registered environments of a run: typed records and the one answer for an unknown env.

``EnvRecord`` is what ``/register-env`` creates and the store persists (as a plain dict, the same
keys as before); ``EnvRegistry`` holds them in ``env_id`` order and is the only place that decides
what an unknown ``env_id`` gets: ``ApiProblem(404, "unknown env_id N (M registered)")``.
``/disconnect-env`` turns that into Atropos's 200 ``{"status": "failure", "error": ...}`` because
Atropos answered so (the one documented exception); every other endpoint answers the 404.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Optional

from atroposlib.api.http import ApiProblem
from atroposlib.type_definitions import RegisterEnv


@dataclass(frozen=True)
class EnvRecord:
    """One registered environment (``/register-env``), as persisted by the store."""

    env_id: int
    max_context_len: int
    weight: float
    desired_name: str
    real_name: str  # desired_name + "_<n>": the n-th env registered under that name (wandb name)
    connected: bool
    min_batch_allocation: Optional[float]  # share of each batch reserved for this env, or None
    group_size: int
    registered_at: float

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvRecord:
        """The record from its stored dict (unknown keys ignored, missing optional ones defaulted)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("min_batch_allocation", None)
        values.setdefault("registered_at", 0.0)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EnvRegistry:
    """The run's envs, indexed by ``env_id`` (their registration order)."""

    def __init__(self, records: Optional[list[EnvRecord]] = None) -> None:
        self._records: list[EnvRecord] = list(records or [])

    @classmethod
    def from_dicts(cls, rows: list[dict[str, Any]]) -> EnvRegistry:
        return cls([EnvRecord.from_dict(r) for r in rows])

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[EnvRecord]:
        return iter(self._records)

    def find(self, env_id: Optional[int]) -> Optional[EnvRecord]:
        """The env with this id, or None (ingest accepts groups of unregistered envs, as Atropos)."""
        if env_id is not None and 0 <= env_id < len(self._records):
            return self._records[env_id]
        return None

    def get(self, env_id: int) -> EnvRecord:
        """The env with this id; an unknown id is a 404 naming how many envs are registered."""
        env = self.find(env_id)
        if env is None:
            raise ApiProblem(404, f"unknown env_id {env_id} ({len(self._records)} registered)")
        return env

    def name(self, env_id: Optional[int]) -> Optional[str]:
        env = self.find(env_id)
        return env.real_name if env is not None else None

    def connected(self) -> list[EnvRecord]:
        return [e for e in self._records if e.connected]

    def shares(self, by_weight: bool = False) -> dict[Optional[int], float]:
        """The fraction of every batch each connected env is guaranteed: its
        ``min_batch_allocation``; with ``by_weight`` (``run-api --batch-shares weight``) the envs
        without one split what is left by their weights."""
        connected = self.connected()
        out: dict[Optional[int], float] = {
            e.env_id: e.min_batch_allocation
            for e in connected
            if e.min_batch_allocation is not None
        }
        if by_weight:
            rest = [e for e in connected if e.min_batch_allocation is None and e.weight > 0]
            total = sum(e.weight for e in rest)
            left = max(0.0, 1.0 - sum(out.values()))
            for e in rest:
                out[e.env_id] = left * e.weight / total
        return out

    def min_sequences(self, batch_size: int, by_weight: bool = False) -> dict[Optional[int], int]:
        """Sequences each connected env is owed per batch (its share of ``batch_size``)."""
        return {env: int(batch_size * share) for env, share in self.shares(by_weight).items()}

    def check_allocation(self, req: RegisterEnv) -> None:
        """A 422 when ``req``'s ``min_batch_allocation`` would make the connected envs' guaranteed
        shares add up to more than 1 (no batch could honour them all)."""
        if req.min_batch_allocation is None:
            return
        held = sum(
            e.min_batch_allocation for e in self.connected() if e.min_batch_allocation is not None
        )
        if held + req.min_batch_allocation > 1.0 + 1e-9:
            raise ApiProblem(
                422,
                f"min_batch_allocation {req.min_batch_allocation:g} would make the connected envs' "
                f"batch shares add up to {held + req.min_batch_allocation:g} (> 1; "
                f"{held:g} is taken): lower it, or disconnect an env first",
            )

    def new_record(self, req: RegisterEnv) -> EnvRecord:
        """The record ``req`` would get (not yet added: the caller commits it first)."""
        same = sum(1 for e in self._records if e.desired_name == req.desired_name)
        return EnvRecord(
            env_id=len(self._records),
            max_context_len=req.max_token_length,
            weight=req.weight if req.weight is not None else 1.0,
            desired_name=req.desired_name,
            real_name=f"{req.desired_name}_{same}",
            connected=True,
            min_batch_allocation=req.min_batch_allocation,
            group_size=req.group_size,
            registered_at=time.time(),
        )

    def put(self, record: EnvRecord) -> None:
        """Add a new record (its id is the next one) or replace the one with its id."""
        if record.env_id == len(self._records):
            self._records.append(record)
        else:
            self._records[record.env_id] = record

    @staticmethod
    def disconnected(record: EnvRecord) -> EnvRecord:
        return replace(record, connected=False)


__all__ = ["EnvRecord", "EnvRegistry"]

"""Read-only views of the run: /status, /status-env, /info, /wandb_info, /latest_example, /peek.

``ViewsMixin`` is part of ``RunService``; everything here is computed from counters kept up to date
by ingest and batching (no queue scans), except ``/status``'s ``blocked_by``: it tries to form a
batch now (without taking it), so it says why the *next* ``/batch`` would come back empty, not why
the last one did.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Optional

import orjson

from atroposlib.api.run_state import RunState
from atroposlib.api.store.base import ACKED, DELIVERED
from atroposlib.type_definitions import (
    ATROPOS_GROUP_KEYS,
    EnvGroupCounts,
    EnvQueueStatus,
    Info,
    Status,
    StatusEnv,
    WandbInfo,
)

MIN_ENV_WEIGHT = 0.01
# Atropos's /latest_example before any group: every Atropos group key but the overrides and env_id,
# as empty lists.
EMPTY_EXAMPLE: dict[str, list[Any]] = {
    k: [] for k in ATROPOS_GROUP_KEYS if k not in ("overrides", "group_overrides", "env_id")
}


class ViewsMixin(RunState):
    """The read-only endpoints' logic."""

    def status_env(self, env_id: int) -> StatusEnv:
        """Atropos's /status-env, from the per-env counters (no queue scan)."""
        with self.lock:
            env = self.envs.get(env_id)  # unknown: the registry's 404
            connected = self.envs.connected()
            total = sum(e.max_context_len * max(0.0, e.weight) for e in connected)
            weight = env.max_context_len * env.weight / total if total > 0 else 0.0
            weight = max(MIN_ENV_WEIGHT, weight)
            shares = self._shares()
            total_min = sum(shares.values())
            q = self.queue
            max_group = q.max_group_size()
            own_sizes = q.env_size_counts.get(env_id, Counter[int]())
            env_group = max([env.group_size, *own_sizes.keys()])
            own = q.env_sequences.get(env_id, 0)
            bs = self.registration.batch_size if self.registration else 0
            mins = self._min_sequences(bs)
            others = 0
            if max_group > 1:
                for other, seqs in q.env_sequences.items():
                    if other == env_id:
                        continue
                    packed = -(-seqs // max_group) * max_group
                    others += max(0, packed - mins.get(other, 0))
            return StatusEnv(
                current_step=self.step,
                queue_size=(own + others) // env_group,
                unallocated_fraction=1.0 - min(total_min, 1.0),
                self_queue_size=own // env_group,
                max_group_size=max_group,
                env_weight=weight,
                max_staleness=self.settings.max_staleness,
                max_batches_offpolicy=self.offpolicy_batches(),
                batch_share=shares.get(env_id),
            )

    def offpolicy_batches(self) -> Optional[int]:
        """Most batches an env may hold ahead of the trainer so that its groups stay within
        ``max_staleness``: a group started when the env's holding drops below ``b`` batches is
        trained ``b`` steps later, on data of weights up to ``weights_lag`` steps older still (the
        trainer's refresh interval - 1, + 1 for an asynchronous push; 1 when the trainer did not
        say). None without a bound."""
        bound = self.settings.max_staleness
        if bound is None:
            return None
        reg = self.registration
        lag = reg.weights_lag if reg is not None and reg.weights_lag is not None else 1
        return max(1, bound - lag)

    # ------------------------------------------------------------------ shared
    def info(self) -> Info:
        reg = self.registration
        if reg is None:
            return Info(batch_size=-1, max_token_len=-1)
        return Info(batch_size=reg.batch_size, max_token_len=reg.max_token_len)

    def wandb_info(self) -> WandbInfo:
        reg = self.registration
        if reg is None:
            return WandbInfo(group=None, project=None)
        return WandbInfo(group=reg.wandb_group, project=reg.wandb_project)

    def _blocked_now(self) -> Optional[str]:
        """Why no batch could be formed right now (None when one could, or before registration)."""
        if self.registration is None:
            return None
        batch_size = self.registration.batch_size
        return self.queue.form_batch(batch_size, self._min_sequences(batch_size)).blocked_by

    def status(self) -> Status:
        with self.lock:
            drops_by_env: Counter[str] = Counter()
            drops_by_bucket: Counter[str] = Counter()
            for (env, bucket), n in self.stale_drops.items():
                drops_by_env[env] += n
                drops_by_bucket[bucket] += n
            return Status(
                current_step=self.step,
                queue_size=len(self.queue),
                queued_sequences=self.queue.total_sequences,
                buffered_sequences=self.buffered_sequences(),
                registered=self.registration is not None,
                started=self.started,
                pending_batch=self.pending.batch_id if self.pending else None,
                blocked_by=self._blocked_now(),
                max_staleness=self.settings.max_staleness,
                stale_dropped_by_env=dict(drops_by_env),
                stale_dropped_by_length=dict(drops_by_bucket),
                queued_by_env=self._queued_by_env(),
                groups_by_env=self._groups_by_env(drops_by_env),
                queued_by_length=dict(self.queue.length_counts),
                repaired_fields=dict(self.repaired_fields),
                quarantined_groups=self.quarantined,
                ack_mode=self.ack_mode(),
            )

    def _groups_by_env(self, stale: Counter[str]) -> dict[str, EnvGroupCounts]:
        """Per env: groups received and delivered (since run-api started), dropped for age."""
        names = {name for name, _ in self.env_groups} | set(stale)
        return {
            name: EnvGroupCounts(
                received=self.env_groups[(name, "received")],
                delivered=self.env_groups[(name, "delivered")],
                stale_dropped=stale[name],
            )
            for name in sorted(names)
        }

    def _queued_by_env(self) -> dict[str, EnvQueueStatus]:
        """Per env: queued sequences and how long its oldest queued group has waited (starvation)."""
        now = time.time()
        out = {}
        for env_id, seqs in self.queue.env_sequences.items():
            oldest = self.queue.oldest(env_id)
            name = self._env_name(env_id) or str(env_id)
            out[name] = EnvQueueStatus(
                sequences=seqs,
                oldest_wait_s=round(now - oldest.received_at, 3) if oldest else 0.0,
            )
        return out

    def latest_example(self) -> bytes:
        with self.lock:
            if self.latest_seq is not None:
                try:
                    return self.store.get_blobs([self.latest_seq])[0]
                except KeyError:
                    pass  # pruned from history: answer like Atropos before any data
            return orjson.dumps(EMPTY_EXAMPLE)

    def peek(self, limit: int, after: Optional[int], env: Optional[str]) -> bytes:
        with self.lock:
            rows = self.store.peek(limit, after, env)
            pending = set(self.pending.seqs) if self.pending else set()
        parts = []
        for r in rows:
            state = r.state
            if state == DELIVERED and r.seq not in pending:  # pragma: no cover - defensive
                state = ACKED
            head = orjson.dumps(
                {"seq": r.seq, "received_at": r.received_at, "env_name": r.env_name, "state": state}
            )
            parts.append(head[:-1] + b',"group":' + r.blob + b"}")
        next_seq = rows[-1].seq if rows else (after if after is not None else self.next_seq - 1)
        return b'{"groups":[' + b",".join(parts) + b'],"next_seq":' + str(next_seq).encode() + b"}"


__all__ = ["EMPTY_EXAMPLE", "MIN_ENV_WEIGHT", "ViewsMixin"]

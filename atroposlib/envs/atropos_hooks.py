"""Atropos's overridable ``BaseEnv`` loop hooks: ``get_server_info``, ``env_step_checks``,
``add_train_workers``.

In Atropos these methods *were* the serve loop. Here the serve runner owns the loop, so the base
versions delegate to it, and the runner calls an env's own version only when the env overrides
the method (``overrides``). That keeps the default path unchanged while env files that override a
hook (an SFT loader that sends pre-made groups on each step and starts no workers, an env that keeps
its own ``max_token_len``) behave as they did on Atropos.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import httpx

from atroposlib.errors import ConfigError

logger = logging.getLogger(__name__)


def overrides(env: Any, name: str) -> bool:
    """Whether ``env``'s class defines its own ``name`` (not the one ``AtroposHooks`` gives)."""
    impl = getattr(type(env), name, None)
    return impl is not None and impl is not getattr(AtroposHooks, name)


def apply_info(env: Any, batch_size: int, max_token_len: int) -> None:
    """What ``/info`` tells an env: the trainer's batch size and token limit (-1: not set). They go
    to the env's run context (``env.context``), not into its config."""
    cfg = env.config
    if batch_size != -1:
        env.context.batch_size = batch_size
    if max_token_len != -1:
        env.max_token_len = max_token_len
    effective = env.context.effective_batch_size(cfg)
    if effective != -1 and cfg.group_size > effective:
        raise ConfigError(
            f"group_size ({cfg.group_size}) must not exceed the trainer's batch_size ({effective})"
        )


class AtroposHooks:
    """Mixed into ``BaseEnv``; see the module docstring."""

    async def get_server_info(self) -> None:
        """Read ``GET /info`` from ``rollout_server_url`` and apply it (batch size, token limit)."""
        cfg = self.config  # type: ignore[attr-defined]
        token = os.environ.get("ATROPOS_API_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(timeout=30.0, headers=headers) as client:
            resp = await client.get(f"{cfg.rollout_server_url.rstrip('/')}/info")
            resp.raise_for_status()
            data = resp.json()
        apply_info(self, int(data.get("batch_size", -1)), int(data.get("max_token_len", -1)))

    async def env_step_checks(self) -> None:
        """Runs each tick after ``status_dict`` is refreshed, before the runner's own step checks
        (evals every ``steps_per_eval``, checkpoints, metrics), which need nothing from here."""
        return None

    async def add_train_workers(self) -> None:
        """Start as many new items as the off-policy and eval limits allow (the runner's rule)."""
        fill = self.context.fill_workers  # type: ignore[attr-defined]
        if fill is None:
            logger.warning("add_train_workers() called outside the serve runner; nothing started")
            return
        await fill()


__all__ = ["AtroposHooks", "apply_info", "overrides"]

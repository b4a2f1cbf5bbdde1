"""Atropos's overridable loop hooks, seen from the runtime: which ones an env overrides, and what
the default ``get_server_info`` does.

In Atropos, ``get_server_info``, ``env_step_checks`` and ``add_train_workers`` *were* the serve
loop. Here the serve runner owns the loop: ``BaseEnv``'s versions of these methods are marked
``default_hook`` and delegate to the runtime, and the runner calls an env's own version only when the
env overrides the method (``overrides``). That keeps the default path unchanged while env files that
override a hook (an SFT loader that sends pre-made groups on each step and starts no workers, an env
that keeps its own ``max_token_len``) behave as they did on Atropos. ``BaseEnv.evaluate`` is a
``default_hook`` too: ``evaluate`` fails with one line for an env that defines none.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from atroposlib.errors import ConfigError
from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.runtime.context import RunContext

logger = logging.getLogger(__name__)

_DEFAULT_MARK = "__atropos_default_hook__"
F = TypeVar("F", bound=Callable[..., Any])


def default_hook(fn: F) -> F:
    """Mark ``fn`` as the base class's version of a hook: an env that keeps it does not override."""
    setattr(fn, _DEFAULT_MARK, True)
    return fn


def overrides(env: object, name: str) -> bool:
    """Whether ``env``'s class defines its own ``name`` (not the ``default_hook`` one)."""
    impl = getattr(type(env), name, None)
    return impl is not None and not getattr(impl, _DEFAULT_MARK, False)


def apply_info(
    context: RunContext, config: BaseEnvConfig, batch_size: int, max_token_len: int
) -> None:
    """What ``/info`` tells an env: the trainer's batch size and token limit (-1: not set). They go
    to the env's run context, not into its config."""
    if batch_size != -1:
        context.batch_size = batch_size
    if max_token_len != -1:
        context.max_token_len = max_token_len
    effective = context.effective_batch_size(config)
    if effective != -1 and config.group_size > effective:
        raise ConfigError(
            f"group_size ({config.group_size}) must not exceed the trainer's batch_size ({effective})"
        )


async def read_server_info(context: RunContext, config: BaseEnvConfig) -> None:
    """``BaseEnv.get_server_info``: read ``GET /info`` from ``rollout_server_url`` and apply it."""
    token = os.environ.get("ATROPOS_API_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=30.0, headers=headers) as client:
        resp = await client.get(f"{config.rollout_server_url.rstrip('/')}/info")
        resp.raise_for_status()
        data = resp.json()
    apply_info(context, config, int(data.get("batch_size", -1)), int(data.get("max_token_len", -1)))


async def fill_workers(context: RunContext) -> None:
    """``BaseEnv.add_train_workers``: start as many new items as serve's limits allow."""
    fill = context.fill_workers
    if fill is None:
        logger.warning("add_train_workers() called outside the serve runner; nothing started")
        return
    await fill()


__all__ = ["apply_info", "default_hook", "fill_workers", "overrides", "read_server_info"]

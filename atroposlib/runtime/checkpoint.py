"""Env checkpoints (Atropos layout): ``<checkpoint_dir>/env_checkpoints/<env>/step-<N>.json``.

Written atomically (temp file + rename), so a crash never leaves a half-written checkpoint.
``save_env`` / ``load_env`` are ``BaseEnv.save_checkpoint`` / ``load_checkpoint``: the directory
and interval come from the trainer (``RunContext``), the name is the env's wandb name.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Optional

from atroposlib.runtime.context import RunContext

logger = logging.getLogger(__name__)


def checkpoint_path(checkpoint_dir: str, env_name: str, step: int) -> Path:
    return Path(checkpoint_dir or ".") / "env_checkpoints" / env_name / f"step-{step}.json"


def save(
    checkpoint_dir: str, env_name: str, step: int, data: Optional[dict[str, Any]]
) -> Optional[Path]:
    if not data:
        return None
    path = checkpoint_path(checkpoint_dir, env_name, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
    logger.info("saved env checkpoint %s", path)
    return path


def load(checkpoint_dir: str, env_name: str, step: int) -> dict[str, Any]:
    path = checkpoint_path(checkpoint_dir, env_name, step)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def _env_key(context: RunContext, env_name: Optional[str]) -> str:
    return context.wandb_prepend or env_name or "env"


def save_env(
    context: RunContext, env_name: Optional[str], step: int, data: Optional[dict[str, Any]]
) -> Optional[Path]:
    """Save an env's ``data`` for ``step`` under the run's checkpoint directory."""
    return save(context.checkpoint_dir, _env_key(context, env_name), step, data)


def load_env(context: RunContext, env_name: Optional[str]) -> dict[str, Any]:
    """What ``save_env`` saved for the run's current step (``{}`` when nothing was)."""
    return load(context.checkpoint_dir, _env_key(context, env_name), context.curr_step)


__all__ = ["checkpoint_path", "load", "load_env", "save", "save_env"]

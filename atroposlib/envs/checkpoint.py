"""Env checkpoints (Atropos layout): ``<checkpoint_dir>/env_checkpoints/<env>/step-<N>.json``.

Written atomically (temp file + rename), so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Optional

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


__all__ = ["checkpoint_path", "load", "save"]

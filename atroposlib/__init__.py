"""atroposlib: RL environments, a durable trajectory API and tools for training language models.

The wire schema is imported eagerly (it is tiny); the env runtime names (``BaseEnv`` and friends) are
imported lazily so that ``import atroposlib`` stays cheap and never needs torch.
"""

from __future__ import annotations

from typing import Any

from atroposlib.type_definitions import (
    Message,
    ScoredData,
    ScoredDataGroup,
    ScoredDataItem,
    validate_group,
)

__version__ = "0.5.0"

_LAZY = {
    "BaseEnv": "atroposlib.envs.base",
    "BaseEnvConfig": "atroposlib.runtime.config",
    "APIServerConfig": "atroposlib.inference_clients.config",
    "ServerManager": "atroposlib.inference_clients.server_manager",
    "TrajectoryClient": "atroposlib.api.client",
    "AsyncTrajectoryClient": "atroposlib.api.client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'atroposlib' has no attribute {name!r}")


__all__ = [
    "Message",
    "ScoredData",
    "ScoredDataGroup",
    "ScoredDataItem",
    "validate_group",
    "__version__",
    *_LAZY,
]

"""OpenEnv environments trained through atroposlib: ``python -m atroposlib.interop.openenv process
--openenv.url URL`` (also ``serve`` and ``evaluate``). See ``env`` and docs/interop.md."""

from atroposlib.interop.openenv.env import OpenEnvEnv
from atroposlib.interop.openenv.settings import OpenEnvEnvConfig, OpenEnvSettings

__all__ = ["OpenEnvEnv", "OpenEnvEnvConfig", "OpenEnvSettings"]

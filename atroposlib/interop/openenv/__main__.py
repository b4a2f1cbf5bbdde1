"""``python -m atroposlib.interop.openenv serve|process|evaluate --openenv.url URL [...]``."""

from typing import cast

from atroposlib.interop.openenv.env import OpenEnvEnv
from atroposlib.runtime.cli import main
from atroposlib.runtime.context import EnvClass

if __name__ == "__main__":
    # what ``OpenEnvEnv.cli()`` does; mypy does not match a BaseEnv class to the EnvClass protocol
    main(cast(EnvClass, OpenEnvEnv))

"""``python -m atroposlib.interop.openenv serve|process|evaluate --openenv.url URL [...]``."""

from atroposlib.interop.openenv.env import OpenEnvEnv

if __name__ == "__main__":
    OpenEnvEnv.cli()

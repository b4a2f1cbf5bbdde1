"""``python -m atroposlib.interop.harbor serve|process|evaluate --harbor.tasks FOLDER [...]``."""

from atroposlib.interop.harbor.env import HarborEnv

if __name__ == "__main__":
    HarborEnv.cli()

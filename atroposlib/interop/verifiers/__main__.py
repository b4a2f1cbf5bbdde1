"""``python -m atroposlib.interop.verifiers serve|process|evaluate --verifiers.env NAME [...]``."""

from typing import cast

from atroposlib.interop.verifiers.env import VerifiersEnv
from atroposlib.runtime.cli import main
from atroposlib.runtime.context import EnvClass

if __name__ == "__main__":
    # what ``VerifiersEnv.cli()`` does; mypy does not match a BaseEnv class to the EnvClass protocol
    main(cast(EnvClass, VerifiersEnv))

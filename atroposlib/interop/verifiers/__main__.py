"""``python -m atroposlib.interop.verifiers serve|process|evaluate --verifiers.env NAME [...]``."""

from atroposlib.interop.verifiers.env import VerifiersEnv

if __name__ == "__main__":
    VerifiersEnv.cli()

"""verifiers v1 tasksets trained through atroposlib: ``python -m atroposlib.interop.verifiers process
--verifiers.env NAME`` (also ``serve`` and ``evaluate``). See ``env`` and docs/interop.md.

Importing this package does not import verifiers; the taskset is loaded when the env starts.
"""

from atroposlib.interop.verifiers.env import VerifiersEnv
from atroposlib.interop.verifiers.settings import VerifiersEnvConfig, VerifiersSettings

__all__ = ["VerifiersEnv", "VerifiersEnvConfig", "VerifiersSettings"]

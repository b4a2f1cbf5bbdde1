"""Old path of the test doubles, kept so ``from atroposlib.envs.testing import check_env`` works.

The doubles live in ``atroposlib.testing``; this module only re-exports them (nothing in the
runtime imports it).
"""

from atroposlib.testing import (
    FakeOpenAIServer,
    Responder,
    SchemaError,
    ScriptedServer,
    acheck_env,
    build_tiny_tokenizer,
    check_env,
    fake_logprob,
    tiny_tokenizer_dir,
)

__all__ = [
    "FakeOpenAIServer",
    "Responder",
    "ScriptedServer",
    "SchemaError",
    "acheck_env",
    "build_tiny_tokenizer",
    "check_env",
    "fake_logprob",
    "tiny_tokenizer_dir",
]

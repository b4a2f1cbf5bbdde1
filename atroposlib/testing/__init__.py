"""Test doubles for environment authors and this project's tests; production code never imports it.

``check_env`` / ``acheck_env`` (run an env end to end and validate its groups), ``FakeOpenAIServer``
(a real-HTTP OpenAI/vLLM-compatible fake), ``fake_logprob``, ``fake_prompt_candidates``, ``tiny_tokenizer_dir`` /
``build_tiny_tokenizer`` (a tokenizer trained locally), ``launch_api_for_testing`` (a throw-away
``run-api`` subprocess), ``SilentServer`` (accepts connections, never answers: a hung server). This is their one home: Atropos's ``atroposlib.tests.api_test_utils`` only
re-exports from here. ``tests/test_import_layers.py`` checks that no module of the runtime imports
this package.

    from atroposlib.testing import check_env
"""

from atroposlib.errors import SchemaError
from atroposlib.inference_clients.backends.scripted import ScriptedServer
from atroposlib.testing.api_server import check_api_running, launch_api_for_testing
from atroposlib.testing.env_check import acheck_env, check_env
from atroposlib.testing.fake_server import (
    FakeOpenAIServer,
    Responder,
    fake_logprob,
    fake_prompt_candidates,
)
from atroposlib.testing.silent_server import SilentServer
from atroposlib.testing.tiny_tokenizer import build_tiny_tokenizer, tiny_tokenizer_dir

__all__ = [
    "FakeOpenAIServer",
    "Responder",
    "ScriptedServer",
    "SchemaError",
    "SilentServer",
    "acheck_env",
    "build_tiny_tokenizer",
    "check_api_running",
    "check_env",
    "fake_logprob",
    "fake_prompt_candidates",
    "launch_api_for_testing",
    "tiny_tokenizer_dir",
]

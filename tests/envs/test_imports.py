"""The Atropos import surface exists, and importing the env runtime never imports torch."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup, ScoredDataItem, Item
from atroposlib.envs.base import EvalHandlingEnum
from atroposlib.envs.server_handling.server_manager import APIServerConfig as A2, ServerManager, ServerBaseline
from atroposlib.envs.server_handling.openai_server import OpenAIServer
from atroposlib.inference_clients.backends.vllm import VLLMServer
from atroposlib.inference_clients.backends.sglang import SGLangServer
from atroposlib.envs.server_handling.managed_server import ManagedServer, SequenceNode
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from atroposlib.type_definitions import Item, number, Message
from atroposlib.envs.reward_fns.registry import registry
from atroposlib.testing import check_env, FakeOpenAIServer
import atroposlib.runtime.runner, atroposlib.runtime.process, atroposlib.runtime.cli, atroposlib.runtime.evaluation
import atroposlib
assert atroposlib.BaseEnv is BaseEnv and atroposlib.BaseEnvConfig is BaseEnvConfig
assert A2 is APIServerConfig
print("TORCH", "torch" in sys.modules)
"""


def test_atropos_imports_work_without_importing_torch():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "TORCH False" in r.stdout

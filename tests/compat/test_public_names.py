"""Every module path and public name that Atropos's environment files and its own tests import.

The list below was derived by reading Atropos's last commit (every ``from atroposlib... import``
in ``environments/`` - community ones included - in ``atroposlib/tests/`` and in
``example_trainer/``), keeping the names that PyPI atroposlib 0.4.0 defines (names only a later,
unreleased commit added, or that no release had, are out of scope). Behaviour is tested where the
name does work: tests/utils/test_atropos_utils.py,
tests/inference_clients/test_atropos_server_compat.py, tests/api/test_atropos_queue_utils.py,
tests/inference/test_get_logprobs_compat.py and the env-file tests in this folder.
"""

from __future__ import annotations

import importlib

import pytest

ATROPOS_IMPORTS = [
    ("atroposlib.api.utils", "find_groups_summing_to_target"),
    ("atroposlib.api.utils", "grab_batch_with_minimum_allocations"),
    ("atroposlib.api.utils", "grab_exact_from_heterogeneous_queue"),
    ("atroposlib.envs.base", "APIServer"),
    ("atroposlib.envs.base", "APIServerConfig"),
    ("atroposlib.envs.base", "BaseEnv"),
    ("atroposlib.envs.base", "BaseEnvConfig"),
    ("atroposlib.envs.base", "EvalHandlingEnum"),
    ("atroposlib.envs.base", "Item"),
    ("atroposlib.envs.base", "ScoredDataGroup"),
    ("atroposlib.envs.base", "ScoredDataItem"),
    ("atroposlib.envs.base", "ServerBaseline"),
    ("atroposlib.envs.eval", "EvalBase"),
    ("atroposlib.envs.eval", "eval_runner"),
    ("atroposlib.envs.eval", "evaluate_log"),
    ("atroposlib.envs.eval", "pass_at_k"),
    ("atroposlib.envs.reward_fns", "CombinedReward"),
    ("atroposlib.envs.reward_fns", "RewardFunction"),
    ("atroposlib.envs.reward_fns", "registry"),
    ("atroposlib.envs.reward_fns.combined_reward", "CombinedReward"),
    ("atroposlib.envs.reward_fns.registry", "registry"),
    ("atroposlib.envs.server_handling.managed_server", "ManagedServer"),
    ("atroposlib.envs.server_handling.managed_server", "ManagedServerAdapter"),
    ("atroposlib.envs.server_handling.managed_server", "SequenceNode"),
    ("atroposlib.envs.server_handling.managed_server_proxy", "create_app"),
    ("atroposlib.envs.server_handling.openai_server", "APIServerConfig"),
    ("atroposlib.envs.server_handling.openai_server", "OpenAIServer"),
    ("atroposlib.envs.server_handling.server_baseline", "APIServer"),
    ("atroposlib.envs.server_handling.server_baseline", "APIServerConfig"),
    ("atroposlib.envs.server_handling.server_baseline", "AsyncSemWithAdaptiveWeight"),
    ("atroposlib.envs.server_handling.server_baseline", "ReasoningConfig"),
    ("atroposlib.envs.server_handling.server_baseline", "ServerBaseline"),
    ("atroposlib.envs.server_handling.server_harness", "ServerHarness"),
    ("atroposlib.envs.server_handling.server_manager", "APIServerConfig"),
    ("atroposlib.envs.server_handling.server_manager", "ServerManager"),
    ("atroposlib.envs.server_handling.tool_call_translator", "ToolCallTranslator"),
    ("atroposlib.envs.server_handling.tool_call_translator", "VLLM_AVAILABLE"),
    ("atroposlib.envs.server_handling.trl_vllm_server", "TrlVllmServer"),
    ("atroposlib.frontend.jsonl2html", "create_html_for_group"),
    ("atroposlib.frontend.jsonl2html", "generate_html"),
    ("atroposlib.tests.api_test_utils", "launch_api_for_testing"),
    ("atroposlib.type_definitions", "GameHistory"),
    ("atroposlib.type_definitions", "Item"),
    ("atroposlib.type_definitions", "Message"),
    ("atroposlib.type_definitions", "number"),
    ("atroposlib.utils.advantages", "allclose_to_first"),
    ("atroposlib.utils.advantages", "compute_discounted_returns"),
    ("atroposlib.utils.advantages", "compute_grpo_process_supervision_advantages"),
    ("atroposlib.utils.advantages", "compute_stats"),
    ("atroposlib.utils.best_of_n_selection", "select_best_index"),
    ("atroposlib.utils.io", "parse_http_response"),
    ("atroposlib.utils.message_history_utils", "ensure_trajectory_token_limit"),
    ("atroposlib.utils.message_history_utils", "truncate_thinking"),
    ("atroposlib.utils.tokenize_for_trainer", "tokenize_for_trainer"),
    ("atroposlib.utils.tool_call_parser", "parse_tool_call"),
]

ATROPOS_MODULES = ["atroposlib.api", "atroposlib.envs"]

# Added by Atropos's last commit after 0.4.0: files its newer env files import.
ATROPOS_LAST_COMMIT_IMPORTS = [
    ("atroposlib.envs.teacher_distillation_env", "TeacherDistillationConfig"),
    ("atroposlib.envs.teacher_distillation_env", "TeacherDistillationEnv"),
    ("atroposlib.envs.server_handling.proxy_client", "ProxyManagedServer"),
    ("atroposlib.envs.server_handling.proxy_client", "create_proxy_session"),
]

# Methods env files override or call (``super().env_step_checks()``, ``server.get_logprobs``).
ATROPOS_METHODS = [
    ("atroposlib.envs.base", "BaseEnv", "get_server_info"),
    ("atroposlib.envs.base", "BaseEnv", "env_step_checks"),
    ("atroposlib.envs.base", "BaseEnv", "add_train_workers"),
    ("atroposlib.envs.base", "BaseEnv", "handle_send_to_api"),
    ("atroposlib.envs.base", "BaseEnv", "evaluate_log"),
    ("atroposlib.envs.server_handling.server_manager", "ServerManager", "get_logprobs"),
    ("atroposlib.envs.server_handling.server_manager", "ServerManager", "managed_server"),
    ("atroposlib.envs.server_handling.server_baseline", "APIServer", "get_logprobs"),
    ("atroposlib.envs.server_handling.managed_server", "ManagedServer", "get_state"),
]


@pytest.mark.parametrize(
    "module, name", ATROPOS_IMPORTS + ATROPOS_LAST_COMMIT_IMPORTS, ids=lambda x: x
)
def test_atropos_name_imports(module, name):
    mod = importlib.import_module(module)
    assert hasattr(mod, name), f"from {module} import {name} fails"


@pytest.mark.parametrize("module", ATROPOS_MODULES)
def test_atropos_module_imports(module):
    importlib.import_module(module)


@pytest.mark.parametrize("module, cls, method", ATROPOS_METHODS, ids=lambda x: x)
def test_atropos_method_exists(module, cls, method):
    klass = getattr(importlib.import_module(module), cls)
    assert callable(getattr(klass, method, None)), f"{cls}.{method} is missing"


def test_the_list_is_the_reading_not_a_sample():
    assert len(ATROPOS_IMPORTS) == len(set(ATROPOS_IMPORTS)) >= 55

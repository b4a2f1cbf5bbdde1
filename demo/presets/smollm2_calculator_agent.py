"""The bring-your-own-agent preset: SmolLM2-135M-Instruct learns the calculator task played by an
unmodified OpenAI Agents SDK agent.

``atropos-demo --model smollm2 --task calculator-agent --inference vllm`` is the calculator preset's
loop (run-api, a real vLLM with the trainer's LoRA hot-loaded after every step, the GRPO trainer) with
``environments/calculator_agent_env.py`` as its env: every episode is one run of
``environments/agents/openai_agents_calculator.py`` (an ``Agent`` with a calculator function tool,
``Runner.run``; in the ``openai-agents`` framework's own Python, ``scripts/setup_agents.sh``; one
process serving the episodes, ``--agent.mode persistent``) against a fresh managed-server proxy
session served in the env's process; the reward is the env's (the answer's last integer is ``a * b``).

Why the Agents SDK and not smolagents: it sends back the tool calls the model wrote, so each episode
is one token-exact sequence (smolagents replays them as text, one node per turn), and it ends on a
plain-text answer (smolagents asks for a tool call at every step). The agent's instructions list the
tool in the Hermes format (SmolLM2's chat template does not render ``tools=``) and its tool answers
``{"result": ...}`` as it is, so its episodes render exactly as the calculator env's do with
unwrapped tool results (``tests/interop/agents/test_frameworks_table.py`` pins the prompt): the
calculator preset's warm-up, held-out measurement and report (``smollm2_calculator``,
``demo.calculator_report``) apply unchanged, on unwrapped tool results. Report folder
``runs/demo-smollm2-calculator-agent/``; ``python bench/agent_learning.py`` runs it and its shuffled
control against the targets.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from demo.calculator_heldout import MAX_TURNS, SEQ_LEN, TOKENS_PER_TURN
from demo.calculator_report import write_calculator_report
from demo.common_sections import common_env_flags, env_section
from demo.lora import ADAPTER_NAME, LORA_ENV_VARS, lora_trainer_flags, vllm_with_lora
from demo.paths import ENVIRONMENTS
from demo.preset import TopologyParts
from demo.presets.smollm2_calculator import DEFAULTS, prepare_episodes
from demo.smollm2 import smollm2_missing, smollm2_preset

ENV_FILE = ENVIRONMENTS / "calculator_agent_env.py"
AGENT = ENVIRONMENTS / "agents" / "openai_agents_calculator.py"
EPISODE_TIMEOUT_S = 900  # three turns of 48 tokens while 32 episodes share vLLM's one CPU worker


def missing() -> Optional[str]:
    """Why this preset cannot run here: SmolLM2's weights, or the Agents SDK's own Python."""
    from atroposlib.interop.agents.frameworks import framework_python, missing_reason

    if framework_python("openai-agents") is None:
        return f"--task calculator-agent needs the OpenAI Agents SDK: {missing_reason('openai-agents')}"
    return smollm2_missing()


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The calculator preset's preparation, on unwrapped tool results (what the agent sends)."""
    return prepare_episodes(out, args, wrap_tool_results=False)


def topology_parts(args: argparse.Namespace, model_dir: Path, out: Path) -> TopologyParts:
    """The calculator preset's sections with the agent harness env and its agent program."""
    model = str(model_dir)
    env_flags = {
        **common_env_flags(args, model, out),
        "held_out": args.heldout,
        "max_token_length": SEQ_LEN,
        "data_path_to_save_groups": str(out / "groups.jsonl"),
    }
    section = env_section(
        "calculator", ENV_FILE, ADAPTER_NAME, env_flags, {"min_tokens_per_second": 0.25}
    )
    section["flags"]["agent"] = {
        "program": f"{{python:openai-agents}} {AGENT} --serve",
        "mode": "persistent",
        "max_turns": MAX_TURNS,
        "max_tokens": TOKENS_PER_TURN,
        "episode_timeout": EPISODE_TIMEOUT_S,
    }
    trainer = {
        **lora_trainer_flags(args, model, out, seq_len=SEQ_LEN),
        "torch_threads": args.threads,
        "micro_batch_tokens": 8 * SEQ_LEN,
    }
    return TopologyParts(
        inference=[vllm_with_lora(model, max_model_len=512)],
        envs=[section],
        trainer_flags=trainer,
        env_vars=dict(LORA_ENV_VARS),
    )


PRESET = replace(
    smollm2_preset(
        "calculator-agent",
        help="SmolLM2-135M-Instruct learns the calculator task played by an unmodified OpenAI "
        "Agents SDK agent through the managed-server proxy, after the calculator warm-up",
        folder="demo-smollm2-calculator-agent",
        env_file=ENV_FILE,
        intro="measuring SmolLM2-135M-Instruct on held-out calculator episodes (the agent's "
        "format) ...",
        defaults=DEFAULTS,
        prepare=prepare,
        topology_parts=topology_parts,
        report=write_calculator_report,
        settings=frozenset({"heldout"}),
    ),
    missing=missing,
)

"""The calculator task played by an unmodified agent program (atroposlib's agent harness).

Each episode asks ``What is a * b?`` (``a`` in 10..999, ``b`` in 10..99, the calculator env's task
and split: ``--env.held_out`` pairs drawn by ``--env.seed`` are never trained on, ``evaluate`` plays
them) and runs ``--agent.program`` against a fresh managed-server proxy session; the reward is 1.0
when the agent's final answer's last integer is ``a * b``, else 0.0. The agent brings its own
calculator tool and tool loop: the default program is the OpenAI Agents SDK example
(``environments/agents/openai_agents_calculator.py`` in that framework's own Python,
``scripts/setup_agents.sh openai-agents``); any other example there, or your own, is
``--agent.program "CMD ..."``. Outcomes, drifts and history edits are counted under ``agent/``
(``atroposlib.interop.agents.harness``).

    python environments/calculator_agent_env.py serve --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --openai.server_type vllm --openai.model_name policy
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pydantic import Field

from atroposlib.envkit.calculator_task import CalcProblem, split_problems
from atroposlib.envkit.servers import local_defaults
from atroposlib.errors import ConfigError
from atroposlib.interop.agents.harness import AgentHarnessConfig, AgentHarnessEnv, AgentSettings
from atroposlib.utils.chat_arithmetic_task import last_integer

AGENTS = Path(__file__).resolve().parent / "agents"
DEFAULT_PROGRAM = f"{{python:openai-agents}} {AGENTS / 'openai_agents_calculator.py'}"


class CalculatorAgentConfig(AgentHarnessConfig):
    held_out: int = Field(
        64, ge=0, description="Operand pairs kept out of training for evaluate()."
    )
    seed: int = Field(0, description="Seed of the held-out split and of the training questions.")


class CalculatorAgentEnv(AgentHarnessEnv):
    name = "calculator_agent"
    env_config_cls = CalculatorAgentConfig
    config_init = local_defaults(
        group_size=8,
        max_token_length=320,
        batch_size=32,
        agent=AgentSettings(program=DEFAULT_PROGRAM, max_turns=3, max_tokens=48),
    )

    async def setup_task(self) -> None:
        cfg = self.config
        assert isinstance(cfg, CalculatorAgentConfig)
        try:
            self.split = split_problems(cfg.held_out, cfg.seed)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.rng = random.Random(cfg.seed + 1)

    async def get_next_item(self) -> CalcProblem:
        return self.split.train_problem(self.rng)

    def task_of(self, item: Any) -> str:
        return str(item.question)

    def reward_of(self, item: Any, answer: str) -> float:
        return 1.0 if last_integer(answer) == item.answer else 0.0

    def eval_items(self) -> list[Any]:
        return list(self.split.held_out)


if __name__ == "__main__":
    CalculatorAgentEnv.cli()

"""The calculator task with mini-swe-agent (its ``DefaultAgent`` on litellm's tool-calling model and a
local shell): the agent computes with a ``bash`` command and submits the number with
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` followed by it; the submission is the answer. Offline,
cost tracking cannot price a local model: ``MSWEA_COST_TRACKING=ignore_errors`` and
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (set here). Runs in the ``mini-swe-agent`` framework's Python
(``scripts/setup_agents.sh mini-swe-agent``); see ``agent_io`` for its arguments."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agent_io import Task, main  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402

SYSTEM = "You are a helpful assistant that can run bash commands."
INSTANCE = (
    "{{task}}\nCompute it with one bash command, then submit the number with the command "
    "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo <the number>`."
)
STEP_LIMIT = 6


def solve(task: Task) -> str:
    model = LitellmModel(
        model_name=f"openai/{task.model}",
        model_kwargs={
            "api_base": task.base_url,
            "api_key": task.api_key,
            "max_tokens": task.max_tokens,
        },
        cost_tracking="ignore_errors",
    )
    with tempfile.TemporaryDirectory() as work:
        agent = DefaultAgent(
            model,
            LocalEnvironment(cwd=work),
            system_template=SYSTEM,
            instance_template=INSTANCE,
            step_limit=STEP_LIMIT,
            cost_limit=0,
        )
        info = agent.run(task.question)
    return str(info.get("submission", "")).strip()


if __name__ == "__main__":
    main(solve, __doc__ or "")

"""The bring-your-own-agent preset (``--task calculator-agent``): its env runs the Agents SDK example
as one persistent process with the calculator preset's limits, on the calculator preset's warm-up and
held-out measurement with tool results as the agent sends them (unwrapped): the gold episodes it
warms up on hold exactly the tool answers the agent's tool gives."""

from __future__ import annotations

import sys

from atroposlib.envkit.calculator_task import CalcProblem, gold_transcript
from demo.calculator_heldout import MAX_TURNS, TOKENS_PER_TURN
from demo.cli import parse_args
from demo.presets import find_preset
from demo.presets.smollm2_calculator_agent import AGENT, ENV_FILE
from tests.interop.agents.conformance import EXAMPLES


def test_the_env_runs_the_agents_sdk_example_persistently(tmp_path):
    preset = find_preset("smollm2", "calculator-agent")
    assert preset.env_file == ENV_FILE and AGENT.is_file()
    args = parse_args(["--model", "smollm2", "--task", "calculator-agent", "--schedule", "overlap"])
    parts = preset.topology_parts(args, tmp_path / "model", tmp_path)
    [env] = parts.envs
    assert env["file"] == str(ENV_FILE)
    agent = env["flags"]["agent"]
    assert agent["program"] == f"{{python:openai-agents}} {AGENT} --serve"
    assert agent["mode"] == "persistent"
    assert (agent["max_turns"], agent["max_tokens"]) == (MAX_TURNS, TOKENS_PER_TURN)
    assert env["flags"]["env"]["held_out"] == args.heldout
    assert env["flags"]["env"]["data_path_to_save_groups"] == str(tmp_path / "groups.jsonl")


def test_the_warm_up_episodes_hold_what_the_agents_tool_answers(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("agent_io", None)
    import agent_io

    episode = gold_transcript(CalcProblem(347, 28), agent_io.SYSTEM_PROMPT, wrap_tool_results=False)
    assert episode[0]["content"] == agent_io.SYSTEM_PROMPT
    assert episode[3] == {"role": "tool", "content": agent_io.calculator("347 * 28")}

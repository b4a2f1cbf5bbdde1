"""The agent harness env (``environments/calculator_agent_env.py`` on ``atroposlib.interop.agents``)
against the fake model, scripted to play the calculator task: an unmodified agent program (a callable
here, the OpenAI Agents SDK example as a command) plays each episode in a fresh proxy session served
in the env's process, and the group holds its session's nodes scored by the env's reward, token-exact.
An agent that crashes or runs out of time is a reward unavailable (never 0), counted; one that asks
past the turn limit is refused and scores 0; a program that cannot be imported or started is one
line at start-up."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.interop.agents.frameworks import framework_python
from atroposlib.interop.agents.harness import AgentSettings
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.tool_call_parser import hermes_call_text
from tests.interop.agents.conformance import REPO, python_of
from tests.jsonl import read_jsonl

ENV_FILE = REPO / "environments" / "calculator_agent_env.py"
AGENTS = "tests.interop.agents.harness_agents"
pytestmark = pytest.mark.timeout(600)


def calculator_reply(prompt: str, body: dict[str, Any]) -> str:
    """The model that calls the calculator first and then states its result."""
    a, b = re.search(r"What is (\d+) \* (\d+)\?", prompt).groups()  # type: ignore[union-attr]
    if prompt.count("<|im_start|>assistant") == 1:
        return hermes_call_text("calculator", {"expression": f"{a} * {b}"})
    return f"{a} * {b} = {int(a) * int(b)}"


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=calculator_reply) as server:
        yield server


def _env_class() -> Any:
    spec = importlib.util.spec_from_file_location("calculator_agent_env", ENV_FILE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.CalculatorAgentEnv


async def _play(
    fake, program: str, items: int = 1, max_token_length: int = 2048, **agent: Any
) -> tuple[Any, list[Any]]:
    cls = _env_class()
    config = cls.env_config_cls(
        tokenizer_name=str(tiny_tokenizer_dir()),
        max_token_length=max_token_length,
        group_size=2,
        use_wandb=False,
        ensure_scores_are_not_same=False,
        held_out=4,
        agent=AgentSettings(program=program, max_turns=3, max_tokens=200, **agent),
    )
    server = APIServerConfig(
        base_url=fake.base_url, model_name="fake-model", server_type="vllm", api_key="x", timeout=60
    )
    env = cls(config=config, server_configs=[server], slurm=False, testing=False)
    groups = []
    try:
        await env.setup()
        for _ in range(items):
            group, _ = await env.collect_trajectories(await env.get_next_item())
            await env.cleanup()  # the runtime's after-item hook: the harness keeps running
            groups.append(group)
    finally:
        await env.shutdown()
        await env.server.close()
    return env, groups


def _process_argv(fake, out: Path, *extra: str) -> list[str]:
    """``calculator_agent_env.py process``: one group of 2 episodes against the fake, saved to ``out``."""
    argv = [
        sys.executable,
        str(ENV_FILE),
        "process",
        "--env.tokenizer_name",
        str(tiny_tokenizer_dir()),
    ]
    argv += ["--openai.base_url", fake.base_url, "--openai.model_name", "fake-model"]
    argv += ["--openai.server_type", "vllm", "--env.total_steps", "1", "--env.group_size", "2"]
    argv += ["--env.data_path_to_save_groups", str(out), "--env.use_wandb", "false"]
    return [*argv, "--agent.max_tokens", "200", *extra]


def test_a_callable_agent_trains_through_the_harness(fake):
    env, [group] = asyncio.run(_play(fake, f"{AGENTS}:tool_loop", items=1))
    data = group.as_group()
    assert data["scores"] == [1.0, 1.0] and len(data["tokens"]) == 2  # one node per episode
    assert data["generation_params"] == {"temperature": 1.0}  # the proxy's default: sampled at 1
    for tokens, masks, over in zip(data["tokens"], data["masks"], data["overrides"], strict=True):
        assert over["token_exact"] is True and over["episode"]["outcome"] == "answered"
        assert over["episode"]["turns"] == 2 and over["episode"]["nodes"] == 1
        trained = [t for t, m in zip(tokens, masks, strict=True) if m != MASK_IGNORE]
        assert 0 < len(trained) < len(tokens)  # the replies trained, the prompt and tool masked
    assert env.tally.counts["agent/outcome/answered"] == 2


def test_a_persistent_program_serves_many_episodes(fake):
    example = REPO / "environments" / "agents" / "openai_calculator.py"
    program = f"{sys.executable} {example} --serve"
    env, groups = asyncio.run(_play(fake, program, items=2, mode="persistent"))
    assert [g.as_group()["scores"] for g in groups] == [[1.0, 1.0], [1.0, 1.0]]
    assert env.tally.counts["agent/outcome/answered"] == 4 and env.program.starts == 1


def test_crashes_timeouts_and_the_turn_limit_are_counted_not_zeros(fake):
    _, [crashed] = asyncio.run(_play(fake, f"{AGENTS}:crashes"))
    data = crashed.as_group()
    assert data["reward_status"] == "unavailable" and len(data["tokens"]) == 2  # kept, masked
    assert all(o["episode"]["outcome"] == "crashed" for o in data["overrides"])
    assert "the agent's own bug" in data["overrides"][0]["episode"]["detail"]
    env, [timed_out] = asyncio.run(_play(fake, f"{AGENTS}:sleeps", episode_timeout=1.0))
    assert timed_out is None  # no completion: nothing to train
    assert env.tally.counts["agent/outcome/timed_out"] == 2
    env, [limited] = asyncio.run(_play(fake, f"{AGENTS}:keeps_asking"))
    data = limited.as_group()
    assert set(data["scores"]) == {0.0} and env.tally.counts["agent/outcome/past_max_turns"] == 2
    assert {o["episode"]["turns"] for o in data["overrides"]} == {3}


def test_an_episode_longer_than_max_token_length_is_cut_and_marked_overlong(fake):
    """The agent's loop is its own, so an episode can outgrow the sequence length: its node is cut
    to max_token_length and marked overlong (the trainer's --overlong rule), never left to make the
    runtime drop the whole group as too long; the cut is counted."""
    _, [whole] = asyncio.run(_play(fake, f"{AGENTS}:tool_loop"))
    full = whole.as_group()
    assert "overlong" not in full or not any(full["overlong"])
    limit = min(len(t) for t in full["tokens"]) - 7
    env, [cut] = asyncio.run(_play(fake, f"{AGENTS}:tool_loop", max_token_length=limit))
    data = cut.as_group()
    assert data["overlong"] == [True, True] and data["scores"] == full["scores"]
    for key in ("tokens", "masks", "inference_logprobs"):
        assert data[key] == [row[:limit] for row in full[key]], key
    assert all(o["token_exact"] for o in data["overrides"])  # checked on the whole node
    assert env.tally.counts["agent/truncated_sequences"] == 2
    # the trainer's own limit, when smaller, is the one kept
    env.context.max_token_len = limit - 3
    assert env.sequence_limit() == limit - 3


def test_a_framework_that_replays_history_as_text_sends_every_node(fake, tmp_path):
    """An agent that sends its tool calls back as text (smolagents) makes a node per turn, so a group
    holds more sequences than group_size: it says its own size (group_overrides), which the runtime
    checks it against, so it reaches the trainer instead of being dropped as the wrong size."""
    env, [group] = asyncio.run(_play(fake, f"{AGENTS}:replays_as_text"))
    data = group.as_group()
    assert len(data["tokens"]) == 4 and data["group_overrides"] == {"group_size": 4}
    assert data["scores"] == [1.0] * 4 and all(o["token_exact"] for o in data["overrides"])
    assert env.server.managed_stats.history_edits == 2  # one per episode, counted
    out = tmp_path / "groups.jsonl"
    argv = _process_argv(fake, out, "--agent.program", f"{AGENTS}:replays_as_text")
    env_vars = {**os.environ, "PYTHONPATH": str(REPO)}  # the callable lives in the test package
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO, env=env_vars)
    assert done.returncode == 0, done.stderr[-3000:]
    [sent] = read_jsonl(out)  # through the runtime's checks, not dropped as wrong_group_size
    assert len(sent["tokens"]) == 4 and sent["group_overrides"] == {"group_size": 4}


def test_a_program_that_cannot_start_is_one_line_at_start_up(fake):
    for program, words in (
        ("tests.interop.agents.nope:agent", "cannot import tests.interop.agents.nope"),
        (f"{AGENTS}:missing", "has no callable 'missing'"),
        ("no-such-agent-program --flag", "'no-such-agent-program' is not an executable program"),
        (f"{sys.executable} /no/such/agent.py", "the script '/no/such/agent.py' does not exist"),
        ("{python:nonesuch} x.py", "unknown framework"),
        (f"{sys.executable} -c 'import nope_module'", "exited at start-up"),
    ):
        persistent = {"mode": "persistent"} if "exited" in words else {}
        with pytest.raises(ConfigError, match=re.escape(words)):
            asyncio.run(_play(fake, program, **persistent))


def test_the_openai_agents_example_trains_through_process(fake, tmp_path):
    if framework_python("openai-agents") is None:
        python_of("openai-agents")  # skips with the set-up's reason
    out = tmp_path / "groups.jsonl"
    argv = _process_argv(fake, out, "--env.ensure_scores_are_not_same", "false")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    [group] = read_jsonl(out)
    assert group["scores"] == [1.0, 1.0]
    assert [o["episode"]["outcome"] for o in group["overrides"]] == ["answered", "answered"]
    assert all(o["token_exact"] for o in group["overrides"])
    bad = subprocess.run(
        [*argv, "--agent.program", "nope.module:agent"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert bad.returncode != 0 and "cannot import nope.module" in bad.stderr
    assert "Traceback" not in bad.stderr, bad.stderr[-2000:]
    assert json.dumps(group)  # the group file is plain JSON
    assert Path(out).stat().st_size > 0

"""The Harbor env against the fake vLLM-flavoured server over real HTTP, on the shipped tasks in the
host sandbox: the shell tool through the managed server's Hermes parser (token-exact sequences, only
the replies trained), scores from the tasks' own verifiers, a command past its limit killed and the
episode going on with the timeout as the tool's reply, and a sandbox or verifier that fails making
the reward unavailable (never 0), counted."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import threading

import pytest

from atroposlib.errors import ConfigError
from atroposlib.interop.harbor.env import HarborEnv
from atroposlib.interop.harbor.settings import HarborSettings
from atroposlib.interop.harbor.task import find_tasks
from atroposlib.testing import FakeOpenAIServer, check_env, tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE
from tests.interop.harbor.conftest import TASKS

pytestmark = pytest.mark.usefixtures("bwrap")
# the tiny test tokenizer spends ~4 tokens a character: room for the prompt and a long call
ROOM = {"max_token_length": 4096}
SOLUTIONS = {t.instruction: t for t in find_tasks(TASKS)}


def _call(command: str) -> str:
    return (
        "<tool_call>"
        + json.dumps({"name": "shell", "arguments": {"command": command}})
        + "</tool_call>"
    )


def _solution(task) -> str:
    return task.solution_script.read_text().split("\n", 1)[1].strip()


def _instruction(prompt: str) -> str:
    return prompt.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0].strip()


class Scripted:
    """Plays four kinds of episode in turn: the reference command, no command at all, a malformed
    call, and the task's recall command (right on a training task); each ends with "Done."."""

    def __init__(self, tasks=SOLUTIONS) -> None:
        self.tasks = tasks
        self._lock, self._next = threading.Lock(), itertools.count()

    def __call__(self, prompt: str, body: dict) -> str:
        task = self.tasks[_instruction(prompt)]
        if prompt.count("<|im_start|>assistant\n") > 1:  # a later turn
            return "Done."
        with self._lock:
            kind = next(self._next) % 4
        return [
            _call(_solution(task)),
            "I would rather not.",
            "<tool_call>{'name': 'shell'}</tool_call>",
            _call(task.metadata["warmup"]["recall_command"]),
        ][kind]


def _settings(**kw) -> HarborSettings:
    return HarborSettings(**{"tasks": str(TASKS / "train"), **kw})


def _trained_runs(tokens, masks):
    runs, current = [], []
    for token, mask in zip(tokens, masks, strict=True):
        if mask != MASK_IGNORE:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def test_episodes_are_scored_by_the_tasks_verifiers_and_trained_token_exactly():
    from transformers import AutoTokenizer

    groups = check_env(
        HarborEnv,
        responder=Scripted(),
        items=2,
        env_overrides={"group_size": 4, "harbor": _settings(), **ROOM},
    )
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    for group in groups:
        by_kind = {}
        for tokens, masks, conv, over, score in zip(
            group["tokens"],
            group["masks"],
            group["messages"],
            group["overrides"],
            group["scores"],
            strict=True,
        ):
            first = conv[2]["content"]
            kind = "nop" if "rather" in first else "malformed" if "'name'" in first else "call"
            by_kind.setdefault(kind, []).append((score, over["episode"]["outcome"]))
            assert over["token_exact"] is True
            assistant = [m["content"] for m in conv if m["role"] == "assistant"]
            runs = _trained_runs(tokens, masks)
            assert [tok.decode(r, skip_special_tokens=True) for r in runs] == assistant
            if (
                kind == "call"
            ):  # the reference and the recall command: both right on a training task
                assert conv[3] == {
                    "role": "tool",
                    "content": '<tool_response>{"exit_code": 0, "output": ""}</tool_response>',
                }
                assert conv[-1]["content"].startswith("reward 1.0")
        assert by_kind == {
            "call": [(1.0, "finished")] * 2,
            "nop": [(0.0, "finished")],
            "malformed": [(0.0, "malformed tool call")],
        }


def test_a_command_past_its_limit_is_killed_and_the_episode_goes_on(task_copy, caplog):
    folder = task_copy("train/count-00")
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace("command_timeout_sec = 10.0", "command_timeout_sec = 1.0")
    )
    task = find_tasks(folder)[0]

    def respond(prompt: str, body: dict) -> str:
        turns = prompt.count("<|im_start|>assistant\n")
        return {1: _call("sleep 30 & sleep 31"), 2: _call(_solution(task))}.get(turns, "Done.")

    with caplog.at_level(logging.WARNING):
        [group] = check_env(
            HarborEnv,
            responder=respond,
            env_overrides={"group_size": 2, "harbor": _settings(tasks=str(folder)), **ROOM},
        )
    assert group["scores"] == [1.0, 1.0]
    conv, record = group["messages"][0], group["overrides"][0]["episode"]
    timeout_reply = json.loads(
        conv[3]["content"][len("<tool_response>") : -len("</tool_response>")]
    )
    assert re.match(
        r"timed out after 1 s: the command and every process it started were killed",
        timeout_reply["error"],
    )
    assert (record["turns"], record["commands_timed_out"], record["outcome"]) == (3, 1, "finished")
    assert sum("commands timed out" in r.getMessage() for r in caplog.records) == 1


def test_a_verifier_without_reward_makes_the_reward_unavailable(task_copy, caplog):
    folder = task_copy("train/rename-00", {"tests/test.sh": "#!/bin/bash\nexit 3\n"})
    with caplog.at_level(logging.WARNING):
        [group] = check_env(
            HarborEnv,
            responder=lambda prompt, body: "Done.",
            env_overrides={"group_size": 2, "harbor": _settings(tasks=str(folder)), **ROOM},
        )
    assert group["reward_status"] == "unavailable"  # masked by the trainer, not trained as 0
    record = group["overrides"][0]["episode"]
    assert record["reward_status"] == "unavailable" and record["failure"] == "verifier"
    assert "the verifier exited 3" in record["note"]
    assert any("harbor/reward_unavailable/verifier" in r.getMessage() for r in caplog.records)


@contextlib.asynccontextmanager
async def _env(settings, responder):
    """A set-up HarborEnv on a fake server answering with ``responder`` (as ``check_env`` builds it)."""
    from atroposlib.inference_clients.config import APIServerConfig

    config, _ = HarborEnv.config_init()
    config = config.model_copy(
        update={
            "tokenizer_name": str(tiny_tokenizer_dir()),
            "use_wandb": False,
            "harbor": settings,
            **ROOM,
        }
    )
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=responder) as fake:
        server = APIServerConfig(
            base_url=fake.base_url, server_type="vllm", api_key="x", model_name="fake-model"
        )
        env = HarborEnv(config=config, server_configs=[server], slurm=False, testing=False)
        try:
            await env.setup()
            yield env
        finally:
            await env.server.close()


def test_a_sandbox_that_fails_to_start_is_unavailable_and_counted(task_copy):
    folder = task_copy(
        "train/find-00",
        {
            "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo no >&2 && exit 7\n"
        },
    )

    async def go():
        async with _env(_settings(tasks=str(folder)), lambda p, b: "Done.") as env:
            scored, _ = await env.collect_trajectory(env.tasks[0])
            return env, scored

    env, scored = asyncio.run(go())
    assert scored is None  # nothing was generated: no sequence to mask either
    assert env.failures.counts["harbor/reward_unavailable/start"] == 1
    assert env.tally.counts["train/outcome/sandbox_failed"] == 1


def test_tasks_the_sandbox_cannot_run_are_left_out_at_start_up(task_copy, caplog):
    good = task_copy("train/count-01")
    bad = task_copy("train/count-02", {"environment/Dockerfile": "FROM a\nRUN pip install numpy\n"})

    async def go(tasks):
        settings = _settings(tasks=str(tasks)) if tasks else HarborSettings()
        async with _env(settings, lambda p, b: "Done.") as env:
            return env

    with caplog.at_level(logging.WARNING):
        env = asyncio.run(go(good.parent))
    assert [t.name for t in env.tasks] == ["count-01"]
    assert any(
        "left out task count-02: its Dockerfile installs packages (pip)" in r.getMessage()
        for r in caplog.records
    )
    good.rename(good.parent.parent / "elsewhere")
    with pytest.raises(ConfigError, match=r"^--harbor.tasks: no task there can be played"):
        asyncio.run(go(bad.parent))
    with pytest.raises(ConfigError, match=r"^--harbor.tasks is required"):
        asyncio.run(go(None))


def test_evaluate_plays_each_evaluation_task_once_greedily(tmp_path):
    import shutil

    held = tmp_path / "held"
    for name in ("count-00", "fix-00", "extract-00"):
        shutil.copytree(TASKS / "heldout" / name, held / name)
    tasks = {t.instruction: t for t in find_tasks(held)}

    def respond(prompt: str, body: dict) -> str:
        task = tasks[_instruction(prompt)]
        if prompt.count("<|im_start|>assistant\n") > 1:
            return "Done."
        return _call(_solution(task)) if task.name != "fix-00" else "Done."

    async def go():
        async with _env(_settings(eval_tasks=str(held)), respond) as env:
            logged = []

            async def evaluate_log(metrics, **kw):
                logged.append((metrics, kw))

            env.evaluate_log = evaluate_log  # type: ignore[method-assign]
            await env.evaluate()
            return logged

    [(metrics, kw)] = asyncio.run(go())
    assert (
        metrics["eval/success"] == pytest.approx(2 / 3) and metrics["eval/reward_unavailable"] == 0
    )
    assert sorted((s["task"], s["score"]) for s in kw["samples"]) == [
        ("count-00", 1.0),
        ("extract-00", 1.0),
        ("fix-00", 0.0),
    ]

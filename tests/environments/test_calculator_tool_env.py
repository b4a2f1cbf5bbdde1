"""The calculator tool env against the fake vLLM-flavoured server over real HTTP: episodes through the
managed server's Hermes parser, every outcome counted, token-exact sequences, held-out questions never
trained, bad tools refused at start-up, and a `process` run of the file copied out of the repository."""

import itertools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from atroposlib.envkit.tool_calls import TOOLBOX, Tool
from atroposlib.errors import ConfigError
from atroposlib.testing import FakeOpenAIServer, check_env, tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE, validate_group
from tests.jsonl import read_jsonl

# the tiny test tokenizer spends ~270 tokens on the system prompt and ~70 on a call
ROOM = {"max_token_length": 1024, "max_tokens_per_turn": 96}
QUESTION = re.compile(r"What is (\d+) \* (\d+)\?")


def _call(expression: str) -> str:
    return f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{expression}"}}}}</tool_call>'


class Scripted:
    """A responder playing five kinds of episode in turn: right, wrong answer after the tool,
    malformed call, calling until max_turns, answering without the tool."""

    def __init__(self) -> None:
        self._lock, self._next = threading.Lock(), itertools.count()

    def __call__(self, prompt_text: str, body: dict) -> str:
        a, b = map(int, QUESTION.findall(prompt_text)[-1])
        replies = prompt_text.split("<|im_start|>assistant\n")[1:-1]  # earlier assistant turns
        if not replies:
            with self._lock:
                kind = next(self._next) % 5
            return [
                _call(f"{a} * {b}"),
                "Let me use the tool. " + _call(f"{a}*{b}"),
                "<tool_call>{'name': 'calculator'}</tool_call>",
                "again " + _call(f"{a} * {b}"),
                f"{a} * {b} is about 1000.",
            ][kind]
        result = re.findall(r'\{"result": (-?\d+)\}|\{"error": "([^"]*)"\}', prompt_text)[-1]
        if replies[0].startswith("again"):
            return "again " + _call(f"{a} * {b}")
        if replies[0].startswith("Let me"):
            return f"{a} * {b} = {a * b + 1}"
        return f"{a} * {b} = {result[0] or 'unknown'}"


def _trained_runs(tokens, masks):
    runs, current = [], []
    for token, mask in zip(tokens, masks, strict=True):
        if mask != MASK_IGNORE:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


class Probe:
    """Subclasses record their instances, so a test can read the env's counters."""

    instances: list = []


def _probe(env_cls, **attrs):
    async def setup(self):
        await env_cls.setup(self)
        Probe.instances.append(self)

    return type("Probe" + env_cls.__name__, (env_cls,), {"setup": setup, **attrs})


def test_episodes_score_count_and_train_exactly_the_generated_tokens(caplog):
    from calculator_tool_env import CalculatorToolEnv
    from transformers import AutoTokenizer

    env_cls = _probe(CalculatorToolEnv)
    with caplog.at_level(logging.WARNING):
        groups = check_env(
            env_cls, responder=Scripted(), items=2, env_overrides={"group_size": 5, **ROOM}
        )
    env = Probe.instances[-1]
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    outcomes = []
    for group in groups:
        assert sorted(group["scores"]) == [0.0, 0.0, 0.0, 0.0, 1.0]
        assert group["overlong"] == [False] * 5  # every reply ended before max_tokens_per_turn
        for tokens, masks, conv, over in zip(
            group["tokens"], group["masks"], group["messages"], group["overrides"], strict=True
        ):
            record = over["episode"]
            outcomes.append(record["outcome"])
            assert over["token_exact"] is True
            assistant = [m["content"] for m in conv if m["role"] == "assistant"]
            assert len(assistant) == record["turns"]
            # token-exact: the trained stretches are the replies (+ end of turn), all else masked
            runs = _trained_runs(tokens, masks)
            assert [tok.decode(r, skip_special_tokens=True) for r in runs] == assistant
            assert all(tok.decode(r).endswith(tok.eos_token) for r in runs)
            tool_turns = [m["content"] for m in conv if m["role"] == "tool"]
            cut = record["outcome"] == "past max_turns"  # its last call is not run
            assert len(tool_turns) == record["valid_tool_calls"] - cut
            assert all(t.startswith("<tool_response>{") for t in tool_turns)
            assert conv[-1] == {"role": "grader", "content": record["note"]}
    assert sorted(outcomes) == sorted(
        ["correct", "wrong answer", "malformed tool call", "past max_turns", "wrong answer"] * 2
    )
    counts = env.tally.counts
    assert counts["train/outcome/correct"] == 2 and counts["train/outcome/past_max_turns"] == 2
    assert counts["train/outcome/malformed_tool_call"] == 2
    assert env.server.managed_stats.tool_parse_errors == {"invalid JSON": 2}  # the managed server's
    assert env.server.managed_stats.sessions == 10 and env.server.managed_stats.drift_total == 0
    assert "train/token_drifts" not in counts
    warned = [
        r.getMessage()
        for r in caplog.records
        if "counted in train/outcome/past_max_turns" in r.getMessage()
    ]
    assert len(warned) == 1  # logged once per kind, counted every time
    assert not any("outcome (correct)" in r.getMessage() for r in caplog.records)


def test_a_tool_that_raises_goes_back_to_the_model_and_is_counted(caplog):
    from calculator_tool_env import CalculatorToolEnv

    def broken(expression: str) -> dict:
        raise RuntimeError("calculator offline")

    calc = TOOLBOX["calculator"]
    env_cls = _probe(
        CalculatorToolEnv,
        tools={"calculator": Tool("calculator", calc.description, calc.parameters, broken)},
    )
    with caplog.at_level(logging.WARNING):
        groups = check_env(
            env_cls,
            responder=Scripted(),
            items=1,
            env_overrides={"group_size": 5, "max_turns": 2, **ROOM},
        )
    env = Probe.instances[-1]
    convs = groups[0]["messages"]
    # the episode whose call parsed and ran (the scripted replies include a malformed call too, and
    # the group's episodes finish in whatever order the event loop runs them)
    first = next(
        c
        for c in convs
        if len(c) > 3
        and c[2]["content"].startswith("<tool_call>")
        and c[3]["content"].startswith("<tool_response>")
    )
    assert json.loads(first[3]["content"][len("<tool_response>") : -len("</tool_response>")]) == {
        "error": "RuntimeError: calculator offline"
    }
    assert "unknown" in first[4]["content"] and groups[0]["scores"] == [0.0] * 5
    # three episodes ran a call (the one still calling at max_turns ends before its second runs)
    assert env.tally.counts["train/tool_error/runtimeerror"] == 3
    assert sum("tool error (RuntimeError)" in r.getMessage() for r in caplog.records) == 1


def test_held_out_questions_are_never_trained_on():
    from calculator_tool_env import CalculatorToolEnv

    env_cls = _probe(CalculatorToolEnv)
    groups = check_env(
        env_cls,
        responses=["12"],
        items=300,
        env_overrides={
            "group_size": 1,
            "min_a": 10,
            "max_a": 20,
            "min_b": 10,
            "max_b": 19,
            "held_out": 50,
            **ROOM,
        },
    )
    env = Probe.instances[-1]
    held = {p.question for p in env.split.held_out}
    asked = {g["overrides"][0]["episode"]["question"] for g in groups}
    assert len(held) == 50 and not asked & held and len(asked) > 40


def test_bad_tools_and_settings_are_one_line_at_start_up():
    from calculator_tool_env import CalculatorToolEnv

    calc = TOOLBOX["calculator"]
    unnamed = _probe(
        CalculatorToolEnv, tools={"x": Tool("my tool", "d", calc.parameters, calc.function)}
    )
    with pytest.raises(ConfigError, match="tool name 'my tool' must be 1-64 letters"):
        check_env(unnamed, responses=["x"], env_overrides=ROOM)
    flat = _probe(CalculatorToolEnv, tools={"x": Tool("x", "d", {"type": "string"}, calc.function)})
    with pytest.raises(ConfigError, match='"parameters" must be a JSON-schema object'):
        check_env(flat, responses=["x"], env_overrides=ROOM)
    with pytest.raises(ConfigError, match="held_out must be between"):
        check_env(
            CalculatorToolEnv,
            responses=["x"],
            env_overrides={"max_a": 10, "max_b": 11, "held_out": 5, **ROOM},
        )
    with pytest.raises(ConfigError, match="no room for an answer"):
        check_env(CalculatorToolEnv, responses=["x"], env_overrides={"max_token_length": 100})


def test_process_runs_with_the_file_copied_out_of_the_repository(env_dir, tmp_path):
    """The env file needs only the installed atroposlib: a copy in an empty folder runs `process`."""
    shutil.copy(env_dir / "calculator_tool_env.py", tmp_path / "calc_env.py")
    out = tmp_path / "groups.jsonl"
    with FakeOpenAIServer(responder=Scripted()) as fake:
        cmd = [
            sys.executable,
            "calc_env.py",
            "process",
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            fake.base_url,
            "--openai.model_name",
            fake.model,
            "--env.total_steps",
            "2",
            "--env.group_size",
            "5",
            "--env.data_path_to_save_groups",
            str(out),
            "--env.max_token_length",
            "1024",
            "--env.max_tokens_per_turn",
            "96",
        ]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
            env={**env, "OMP_NUM_THREADS": "1"},
        )
    assert result.returncode == 0, result.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 2
    for group in groups:
        validate_group(group)
        assert all(o["token_exact"] for o in group["overrides"])
    assert sum(sum(g["scores"]) for g in groups) == 2.0  # groups run at once: 10 episodes, 2 right

"""Tool calling (single and multi-turn), HumanEval code execution and Gymnasium games via check_env."""

import itertools
import json
import re
import threading

import pytest

from atroposlib.envkit.humaneval import load_problems
from atroposlib.errors import ConfigError
from atroposlib.testing import check_env, tiny_tokenizer_dir


def _counter():
    lock, count = threading.Lock(), itertools.count()

    def next_value() -> int:
        with lock:
            return next(count)

    return next_value


def _trained_runs(tokens, masks):
    """Contiguous runs of trained (unmasked) token ids."""
    runs, current = [], []
    for token, mask in zip(tokens, masks, strict=True):
        if mask != -100:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def test_single_turn_tool_calling_scores_and_reasons():
    from tool_calling_server import ToolCallingEnv

    def responder(prompt_text: str, body: dict) -> str:
        city = re.search(r"weather in (\w+)", prompt_text)
        convert = re.search(r"Convert (\d+) (\w+) to (\w+)", prompt_text)
        calc = re.search(r"compute (\d+ \* \d+)", prompt_text)
        if city:
            call = {"name": "get_weather", "arguments": {"city": city.group(1)}}
        elif convert:
            value, src, dst = convert.groups()
            call = {
                "name": "convert_units",
                "arguments": {"value": int(value), "from_unit": src, "to_unit": dst},
            }
        else:
            call = {
                "name": "calculator",
                "arguments": {"expression": calc.group(1) if calc else "?"},
            }
        good = f"<tool_call>{json.dumps(call)}</tool_call>"
        return [good, "<tool_call>{'name': 'x'}</tool_call>", "I would call a tool"][
            body["choice_index"]
        ]

    groups = check_env(
        ToolCallingEnv, responder=responder, items=4, env_overrides={"group_size": 3}
    )
    assert len(groups) == 4
    for group in groups:
        assert group["scores"] == [1.0, 0.0, 0.0]
        notes = [conv[-1]["content"] for conv in group["messages"]]
        assert (
            notes[0] == "exact match" and "invalid JSON" in notes[1] and notes[2] == "no tool call"
        )


def test_tool_prompt_that_cannot_fit_is_a_config_error():
    from tool_calling_server import ToolCallingEnv

    with pytest.raises(ConfigError, match="no room for an answer"):
        check_env(ToolCallingEnv, responses=["x"], env_overrides={"max_token_length": 100})
    with pytest.raises(ConfigError, match="unknown or no tools"):
        check_env(ToolCallingEnv, responses=["x"], env_overrides={"tools": ["wether"]})
    only_weather = check_env(
        ToolCallingEnv, responses=["x"], items=3, env_overrides={"tools": ["get_weather"]}
    )
    for group in only_weather:  # the one tool offered is the one asked for
        assert "What is the weather in" in group["messages"][0][1]["content"]


def test_multi_turn_tool_calling_executes_tools_and_tracks_tokens_exactly():
    from tool_calling_multiturn_env import MultiTurnToolEnv
    from transformers import AutoTokenizer

    first_turns = _counter()

    def responder(prompt_text: str, body: dict) -> str:
        if '"unit": "f"' in prompt_text:
            value = re.findall(r'"value": ([\d.]+), "unit": "f"', prompt_text)[-1]
            return f"<think>done</think><answer>{value}</answer>"
        if "temperature_c" in prompt_text:
            celsius = re.findall(r'"temperature_c": (-?\d+)', prompt_text)[-1]
            call = {
                "name": "convert_units",
                "arguments": {"value": int(celsius), "from_unit": "c", "to_unit": "f"},
            }
            return f"<tool_call>{json.dumps(call)}</tool_call>"
        if first_turns() % 2:
            return '<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>'
        city = re.search(r"temperature in (\w+) in Fahrenheit", prompt_text).group(1)
        return (
            f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}</tool_call>'
        )

    groups = check_env(
        MultiTurnToolEnv, responder=responder, items=1, env_overrides={"group_size": 4}
    )
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    group = groups[0]
    assert sorted(group["scores"]) == [0.0, 0.0, 1.0, 1.0]
    for tokens, masks, score, conv in zip(
        group["tokens"], group["masks"], group["scores"], group["messages"], strict=True
    ):
        assistant = [m["content"] for m in conv if m["role"] == "assistant"]
        if score == 1.0:
            assert len(assistant) == 3 and sum(m["role"] == "tool" for m in conv) == 2
            assert conv[-1] == {"role": "grader", "content": "correct"}
        else:
            assert len(assistant) == 1 and conv[-1]["content"].startswith("malformed tool call:")
        # token-exact: the trained runs are exactly the generated replies (+ end of turn), the rest masked
        runs = _trained_runs(tokens, masks)
        assert [tokenizer.decode(r, skip_special_tokens=True) for r in runs] == assistant
        rendered = tokenizer.apply_chat_template(
            conv[:-1], tokenize=False, add_generation_prompt=False
        )
        assert rendered.startswith(tokenizer.decode(tokens, skip_special_tokens=False))


def test_code_execution_runs_tests_and_marks_sandbox_failures_unavailable(monkeypatch):
    from code_execution_server import CodeExecutionEnv

    import atroposlib.envkit.sandbox as sandbox

    problems = {p["entry_point"]: p for p in load_problems()}

    def responder(prompt_text: str, body: dict) -> str:
        entry = next((e for e in problems if f"def {e}(" in prompt_text), None)
        if entry is None or body["choice_index"] == 1:
            return "```python\ndef wrong():\n    return None\n```"
        problem = problems[entry]
        return (
            f"<think>easy</think>```python\n{problem['prompt']}{problem['canonical_solution']}```"
        )

    overrides = {"group_size": 2, "eval_size": 5, "timeout_s": 5.0}
    groups = check_env(CodeExecutionEnv, responder=responder, items=2, env_overrides=overrides)
    for group in groups:
        assert group["scores"] == [1.0, -1.0] and "reward_status" not in group
        assert group["messages"][0][-1]["content"].startswith("passed")
        assert group["messages"][1][-1]["content"].startswith("failed")

    monkeypatch.setattr(
        sandbox, "_plan", lambda: sandbox._Plan("/nonexistent/python3", False, False)
    )
    broken = check_env(CodeExecutionEnv, responder=responder, items=1, env_overrides=overrides)
    assert broken[0]["reward_status"] == "unavailable"
    assert broken[0]["messages"][0][-1]["content"].startswith("unavailable")


def test_blackjack_and_taxi_episodes():
    from gymnasium_games_env import GymGameEnv

    turns = _counter()

    def blackjack(prompt_text: str, body: dict) -> str:
        return "<action>stick</action>" if turns() % 2 == 0 else "<action>dance</action>"

    groups = check_env(GymGameEnv, responder=blackjack, items=2, env_overrides={"group_size": 4})
    assert len(groups) == 2
    for group in groups:
        notes = [conv[-1]["content"] for conv in group["messages"]]
        invalid = [n for n in notes if n.startswith("invalid move: unknown action 'dance'")]
        assert len(invalid) == 2
        for note, score in zip(notes, group["scores"], strict=True):
            assert score == -1.0 if note.startswith("invalid") else score in (-1.0, 0.0, 1.0)

    groups = check_env(
        GymGameEnv,
        responses=["<action>north</action>"],
        items=1,
        env_overrides={"group_size": 2, "game": "taxi", "max_turns": 3, "reward_scale": 0.5},
    )
    for tokens, masks, score, conv in zip(
        groups[0]["tokens"],
        groups[0]["masks"],
        groups[0]["scores"],
        groups[0]["messages"],
        strict=True,
    ):
        assert score == -1.5  # three moves at -1 each, scaled by 0.5
        assert sum(m["role"] == "assistant" for m in conv) == 3
        assert len(_trained_runs(tokens, masks)) == 3
        assert "The taxi (T) is at row" in conv[1]["content"]

    # a tighter max_token_length stops the episode before a move could pass it
    limit = len(groups[0]["tokens"][0]) - 1
    short = check_env(
        GymGameEnv,
        responses=["<action>north</action>"],
        items=1,
        env_overrides={
            "group_size": 2,
            "game": "taxi",
            "max_turns": 3,
            "max_token_length": limit,
            "max_tokens_per_turn": 32,
        },
    )
    for tokens, conv in zip(short[0]["tokens"], short[0]["messages"], strict=True):
        assert len(tokens) <= limit
        assert conv[-1]["content"] == "stopped: another move could pass max_token_length"

"""``bench/trl_grpo_calculator.py``'s task side, against our env's own rules: the tool TRL calls sends
back the text our ``Episode`` sends, and its reward reads a TRL completion (a list of messages) as our
``Episode`` reads the same turns. TRL's trainer itself needs TRL's environment and runs in the bench."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from atroposlib.envkit.calculator_task import CalcProblem, Episode
from atroposlib.envkit.tool_calls import TOOLBOX
from atroposlib.utils.tool_call_parser import hermes_call_text

BENCH = Path(__file__).resolve().parents[2] / "bench" / "trl_grpo_calculator.py"
TOOLS = {"calculator": TOOLBOX["calculator"]}
PROBLEM = CalcProblem(123, 45)


@pytest.fixture(scope="module")
def trl_side():
    spec = importlib.util.spec_from_file_location("trl_grpo_calculator", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _ours_tool_text(expression: str) -> str:
    episode = Episode(PROBLEM, "system", max_turns=3)
    call = {"id": "c1", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    episode.take_reply(hermes_call_text("calculator", {"expression": expression}), "", [call])
    episode.run_pending(TOOLS)
    return episode.messages[-1]["content"]


@pytest.mark.parametrize(
    "expression", ["123 * 45", "7 / 2", "-3 + 4", "1 / 0", "2 ** 8", "12 *", "import os"]
)
def test_the_tool_sends_back_what_our_env_sends(trl_side, expression):
    assert trl_side.calculator(expression) == _ours_tool_text(expression)


def test_a_failing_call_is_an_error_in_the_tools_text_not_an_exception(trl_side):
    text = trl_side.calculator("1 / 0")
    assert text.startswith("<tool_response>") and text.endswith("</tool_response>")
    inner = json.loads(text[len("<tool_response>") : -len("</tool_response>")])
    assert inner == {"error": "ZeroDivisionError: division by zero"}


def _call(expression: str) -> dict:
    return {
        "type": "function",
        "function": {"name": "calculator", "arguments": {"expression": expression}},
    }


def _ours(replies: list[tuple[str, list[dict]]]) -> str:
    """Our Episode's outcome for these (raw text, parsed calls) assistant turns."""
    episode = Episode(PROBLEM, "system", max_turns=3)
    for raw, calls in replies:
        errors = ["bad JSON"] if "<tool_call>" in raw and not calls else []
        episode.take_reply(raw, "" if calls else raw, calls, errors)
        if episode.done:
            break
        episode.run_pending(TOOLS)
    assert episode.outcome is not None
    return episode.outcome


def _trl(trl_side, replies: list[tuple[str, list[dict]]]) -> str:
    """The bench's reading of the TRL completion for the same turns."""
    return trl_side.episode_outcome(_trl_completion(trl_side, replies), PROBLEM.answer)


def _trl_completion(trl_side, replies: list[tuple[str, list[dict]]]) -> list[dict]:
    """TRL's completion for these turns: assistant messages as its response parser leaves them
    (calls parsed, a malformed one kept as text), the tool's messages between them."""
    completion: list[dict] = []
    for raw, calls in replies[:3]:
        if calls:
            completion.append({"role": "assistant", "content": "", "tool_calls": calls})
            for c in calls:
                text = trl_side.calculator(c["function"]["arguments"]["expression"])
                completion.append({"role": "tool", "name": "calculator", "content": text})
        else:
            completion.append({"role": "assistant", "content": raw})
            break
    return completion


CALL = hermes_call_text("calculator", {"expression": "123 * 45"})
CASES = {
    "call, then the right answer": [(CALL, [_call("123 * 45")]), ("123 * 45 = 5535", [])],
    "a right answer without the tool": [("123 * 45 = 5535", [])],
    "call, then a wrong answer": [(CALL, [_call("123 * 45")]), ("It is 5536.", [])],
    "a malformed call": [('<tool_call>{"name": "calculator", "arguments": </tool_call>', [])],
    "calls on every turn": [(CALL, [_call("123 * 45")])] * 3,
    "a call on a wrong expression, then its result": [
        (CALL, [_call("123 * 44")]),
        ("5412", []),
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_reward_reads_a_trl_completion_as_our_episode_reads_it(trl_side, case):
    replies = CASES[case]
    assert _trl(trl_side, replies) == _ours(replies)


def test_the_reward_is_one_for_a_right_episode_and_zero_for_every_other_outcome(trl_side):
    outcomes = {case: _ours(replies) for case, replies in CASES.items()}
    assert set(outcomes.values()) == {
        "correct",
        "wrong answer",
        "malformed tool call",
        "past max_turns",
    }
    completions, expected = [], []
    for case, replies in CASES.items():
        completions.append(_trl_completion(trl_side, replies))
        expected.append(1.0 if outcomes[case] == "correct" else 0.0)
    n = len(completions)
    assert trl_side.episode_reward(completions, [PROBLEM.a] * n, [PROBLEM.b] * n) == expected

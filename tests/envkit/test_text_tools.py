"""text_tasks, mcqa and tool_calls: procedural items, answer extraction, Hermes tool-call parsing."""

import json
import random

import pytest

from atroposlib.envkit.mcqa import extract_letter, format_question, score_letter
from atroposlib.envkit.text_tasks import extract_answer_tag, make_items, score_exact
from atroposlib.envkit.tool_calls import (
    TOOLBOX,
    ToolCall,
    compare_tool_calls,
    execute_call,
    hermes_system_prompt,
    multi_turn_task,
    parse_tool_calls,
    single_turn_task,
)


def test_letter_counting_items_have_true_answers():
    for item in make_items("letter_counting", 50, seed=0):
        letter = item["question"].split('"')[1]
        phrase = item["question"].split('"')[3]
        assert item["answer"] == str(phrase.count(letter))


def test_text_reversal_scoring():
    item = make_items("text_reversal", 1, seed=5)[0]
    assert score_exact(f"<think>x</think><answer>{item['answer']}</answer>", item["answer"]) == 1.0
    assert score_exact(f"<answer>{item['answer']}x</answer>", item["answer"]) == 0.0
    assert score_exact("no tags", item["answer"]) == 0.0
    assert extract_answer_tag("<think><answer>1</answer></think><answer> 2 </answer>") == "2"
    with pytest.raises(ValueError):
        make_items("nope", 1, 0)


@pytest.mark.parametrize(
    "response,letter,reason",
    [
        ("<think>x</think>The answer is B.", "B", "ok"),
        ("<think>x</think>\\boxed{C}", "C", "ok"),
        ("<think>x</think>\nD", "D", "ok"),
        ("B", None, "no closed </think> block"),
        ("<think>a</think><think>b</think>A", None, "more than one thinking block"),
        ("<think>x</think> (A) or (B)", None, "ambiguous answer: A, B"),
        ("<think>x</think>Answer: E", None, "letter E is not one of A, B, C, D"),
        ("<think>it is C</think> I pick (A)", "A", "ok"),
        (
            "<think>x</think> the answer is a guess",
            None,
            "no answer letter after the thinking block",
        ),
    ],
)
def test_extract_letter(response, letter, reason):
    result = extract_letter(response, 4)
    assert (result.letter, result.reason) == (letter, reason)


def test_format_and_score_letter():
    text = format_question("Q?", ["x", "y", "z"])
    assert "A) x" in text and "C) z" in text
    assert score_letter("<think>.</think>Answer: C", 2, 3) == 1.0
    assert score_letter("<think>.</think>Answer: B", 2, 3) == 0.0
    with pytest.raises(ValueError):
        format_question("Q?", ["only one"])


def test_parse_tool_calls_well_formed_and_reasons_for_malformed():
    good = '<think>?</think><tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    parsed = parse_tool_calls(good)
    assert parsed.calls == [ToolCall("get_weather", {"city": "Oslo"})] and parsed.errors == []
    cases = {
        "<tool_call>{name: x}</tool_call>": "invalid JSON",
        "<tool_call>[1]</tool_call>": "expected a JSON object",
        '<tool_call>{"arguments": {}}</tool_call>': 'missing or empty "name"',
        '<tool_call>{"name": "a", "arguments": 5}</tool_call>': '"arguments" must be an object',
        '<tool_call>{"name": "a"': "never closed",
    }
    for text, reason in cases.items():
        errors = parse_tool_calls(text).errors
        assert len(errors) == 1 and reason in errors[0]
    stringy = parse_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>')
    assert stringy.calls == [ToolCall("a", {"x": 1})]


def test_compare_tool_calls():
    ref = [ToolCall("calculator", {"expression": "2 * 3"})]
    exact = parse_tool_calls(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2*3"}}</tool_call>'
    )
    assert compare_tool_calls(exact, ref) == (1.0, "exact match")
    wrong = parse_tool_calls(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2*4"}}</tool_call>'
    )
    assert compare_tool_calls(wrong, ref)[0] == 0.0
    broken = parse_tool_calls("<tool_call>{oops}</tool_call>")
    score, reason = compare_tool_calls(broken, ref)
    assert score == 0.0 and "invalid JSON" in reason
    assert compare_tool_calls(parse_tool_calls("no call"), ref) == (0.0, "no tool call")


def test_toolbox_execution_and_tasks():
    ok, out = execute_call(ToolCall("calculator", {"expression": "2*(3+4)"}))
    assert ok and json.loads(out) == {"result": 14}
    ok, out = execute_call(ToolCall("calculator", {"expression": "__import__('os')"}))
    assert not ok and "error" in json.loads(out)
    assert not execute_call(ToolCall("nope", {}))[0]
    rng = random.Random(0)
    for _ in range(20):
        task = single_turn_task(rng)
        assert all(execute_call(call)[0] for call in task["reference"])
    task = multi_turn_task(rng)
    assert isinstance(task["answer"], float)
    prompt = hermes_system_prompt(list(TOOLBOX.values()))
    assert "<tools>" in prompt and '"get_weather"' in prompt

"""calculator_task (problems, held-out split, the episode rules), tool schema checks, Tally and the
token-exactness check."""

import json
import logging
import random

import pytest

from atroposlib.envkit.calculator_task import (
    CalcProblem,
    Episode,
    gold_transcript,
    last_integer,
    run_tool,
    split_problems,
    tool_system_prompt,
)
from atroposlib.envkit.tally import Tally
from atroposlib.envkit.token_check import TurnIds, exactness_problem
from atroposlib.envkit.tool_calls import (
    TOOLBOX,
    Tool,
    template_renders_tools,
    tool_schema_problem,
)
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.utils.tool_call_parser import hermes_calls

TOOLS = {"calculator": TOOLBOX["calculator"]}


def _call(name, arguments, call_id="c1"):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def test_held_out_pairs_are_never_drawn_for_training():
    split = split_problems(40, seed=3, a_range=(10, 19), b_range=(10, 19))  # 100 pairs, 40 held out
    assert len(set(split.held_out)) == 40
    rng = random.Random(0)
    drawn = {split.train_problem(rng) for _ in range(5000)}
    assert not drawn & set(split.held_out)
    assert len(drawn) == 60  # every other pair is trained on
    assert split_problems(40, seed=3, a_range=(10, 19), b_range=(10, 19)) == split  # by the seed
    with pytest.raises(ValueError, match="held_out must be between 0 and 50"):
        split_problems(51, seed=0, a_range=(10, 19), b_range=(10, 19))
    with pytest.raises(ValueError, match="ordered"):
        split_problems(1, seed=0, a_range=(20, 10))


def test_a_gold_episode_scores_one_in_two_turns():
    problem = CalcProblem(347, 28)
    system = tool_system_prompt(list(TOOLS.values()))
    gold = gold_transcript(problem, system)
    episode = Episode(problem, system, max_turns=3)
    episode.take_reply(gold[2]["content"], None, [_call("calculator", {"expression": "347 * 28"})])
    assert not episode.done and episode.valid_calls == 1
    [result] = episode.run_pending(TOOLS)
    assert json.loads(result.text) == {"result": 9716} and result.error_kind is None
    assert episode.transcript == gold[:4]
    assert episode.messages[2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert episode.messages[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '<tool_response>{"result": 9716}</tool_response>',
    }
    episode.take_reply(gold[4]["content"], gold[4]["content"], None)
    assert (episode.outcome, episode.score, episode.turns) == ("correct", 1.0, 2)
    assert episode.record()["valid_tool_calls"] == 1


def test_episode_outcomes_wrong_malformed_and_past_max_turns():
    problem = CalcProblem(12, 34)
    wrong = Episode(problem, "s", max_turns=3)
    wrong.take_reply("12 * 34 = 418", "12 * 34 = 418", None)
    assert (wrong.outcome, wrong.score, wrong.note) == (
        "wrong answer",
        0.0,
        "answer 418, expected 408",
    )

    raw = "<tool_call>{'name': 'calculator'}</tool_call>"
    malformed = Episode(problem, "s", max_turns=3)
    malformed.take_reply(raw, raw, None, [e.message for e in hermes_calls(raw)[1]])
    assert malformed.outcome == "malformed tool call" and "invalid JSON" in malformed.note
    assert malformed.malformed_calls == 1 and malformed.score == 0.0

    stringy = Episode(problem, "s", max_turns=3)  # the parser kept it, its arguments are not JSON
    stringy.take_reply("x", None, [_call("calculator", "12 * 34")])
    assert stringy.outcome == "malformed tool call" and "not JSON" in stringy.note

    looping = Episode(problem, "s", max_turns=2)
    for _ in range(2):
        assert not looping.done
        looping.take_reply("c", None, [_call("calculator", {"expression": "1 + 1"})])
        if not looping.done:
            looping.run_pending(TOOLS)
    assert (looping.outcome, looping.turns, looping.score) == ("past max_turns", 2, 0.0)
    with pytest.raises(RuntimeError, match="over"):
        looping.take_reply("more", "more", None)


def test_a_tool_that_raises_is_the_models_information_and_counted_by_kind():
    def explode(expression: str) -> dict:
        raise RuntimeError("the calculator broke")

    broken = {"calculator": Tool("calculator", "d", TOOLS["calculator"].parameters, explode)}
    episode = Episode(CalcProblem(12, 34), "s", max_turns=3)
    episode.take_reply(
        "c", None, [_call("calculator", {"expression": "12 * 34"}), _call("nope", {})]
    )
    results = episode.run_pending(broken)
    assert [r.error_kind for r in results] == ["RuntimeError", "unknown tool"]
    assert "the calculator broke" in json.loads(results[0].text)["error"]
    assert episode.tool_errors == ["RuntimeError", "unknown tool"] and not episode.done
    deep = run_tool("c", "calculator", {"expression": "(" * 400 + "1" + ")" * 400}, TOOLS)
    assert deep.error_kind is not None and "error" in json.loads(deep.text)  # not an escape


def test_last_integer():
    assert last_integer("so 1,234 * 2 = 2,468.") == 2468 and last_integer("none") is None
    assert last_integer("-12 then 7") == 7


def test_tool_schema_problems_are_named():
    calc = TOOLS["calculator"]
    assert tool_schema_problem(calc) is None
    assert "must be 1-64 letters" in tool_schema_problem(
        Tool("bad name!", "d", calc.parameters, calc.function)
    )
    not_object = Tool("t", "d", {"type": "string"}, calc.function)
    assert '"parameters" must be a JSON-schema object' in tool_schema_problem(not_object)
    unserializable = Tool(
        "t", "d", {"type": "object", "properties": {"x": {"default": object()}}}, calc.function
    )
    assert "is not JSON" in tool_schema_problem(unserializable)


def test_template_renders_tools():
    """The tiny ChatML template ignores tools=; a template that lists them is recognised."""
    from transformers import AutoTokenizer

    tools = list(TOOLS.values())
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    assert not template_renders_tools(tok, tools)
    tok.chat_template = (
        "{% if tools %}{% for t in tools %}{{ t.function.name }}\n{% endfor %}{% endif %}"
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    )
    assert template_renders_tools(tok, tools)


def test_tally_counts_every_event_and_logs_each_kind_once(caplog):
    gauges = {}
    tally = Tally(gauges.__setitem__)
    with caplog.at_level(logging.WARNING, logger="atroposlib.envkit.tally"):
        for _ in range(3):
            tally.count("tool error", "ZeroDivisionError", "in What is 1 / 0?")
        tally.count("tool error", "unknown tool")
        tally.count("malformed tool calls", None, n=0)
    assert gauges == {"train/tool_error/zerodivisionerror": 3, "train/tool_error/unknown_tool": 1}
    assert tally.total("tool error") == 4
    assert (
        len(caplog.records) == 2
        and "tool error (ZeroDivisionError): in What is 1 / 0?" in caplog.text
    )


def test_exactness_problem_finds_each_kind_of_difference():
    turns = [TurnIds([1, 2, 3], [10, 11]), TurnIds([1, 2, 3, 10, 11, 4, 5], [12, 13])]
    tokens = [1, 2, 3, 10, 11, 4, 5, 12, 13]
    masks = [-100, -100, -100, 10, 11, -100, -100, 12, 13]
    assert exactness_problem(turns, tokens, masks) is None
    retokenized = [1, 2, 3, 10, 99, 4, 5, 12, 13]  # turn 1's reply re-tokenized differently
    assert "turn 1: the generated ids differ" in exactness_problem(turns, retokenized, masks)
    split_node = [-100] * 7 + [12, 13]  # the old split-node outcome: turn 1 masked
    assert "position 3: a generated token is not trained" in exactness_problem(
        turns, tokens, split_node
    )
    tool_trained = masks[:5] + [4, -100] + masks[7:]
    assert "position 5: a token the model did not generate is trained" in exactness_problem(
        turns, tokens, tool_trained
    )
    other_prompt = [TurnIds([1, 2, 3], [10, 11]), TurnIds([1, 2, 7, 10, 11, 4, 5], [12, 13])]
    assert "turn 2: the prompt the server saw differs" in exactness_problem(
        other_prompt, tokens, masks
    )

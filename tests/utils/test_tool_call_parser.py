"""The one Hermes tool-call parser, and the three readers built on it agreeing on the same reply."""

from __future__ import annotations

import json

from atroposlib.inference_clients.tool_call_translator import parse_hermes
from atroposlib.utils.tool_call_parser import (
    hermes_blocks,
    hermes_call_text,
    parse_tool_call,
    unclosed_tags,
)

REPLY = (
    "Let me look.\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
    "<tool_call>[1, 2]</tool_call>\n"
    "<tool_call>{not json}</tool_call>\n"
    "<tool_call>{'name': 'calc', 'arguments': {'x': 2}}</tool_call>"
)


def test_blocks_in_order_with_a_reason_for_each_malformed_one():
    blocks = hermes_blocks(REPLY)
    assert [b.name for b in blocks] == ["get_weather", None, None, None]
    assert blocks[0].arguments == {"city": "Oslo"}
    assert blocks[1].error == "expected a JSON object, got list"
    assert blocks[2].error.startswith("invalid JSON (")
    assert blocks[3].error.startswith("invalid JSON (")  # single quotes: only when lenient
    lenient = hermes_blocks(REPLY, lenient=True)
    assert lenient[3].name == "calc" and lenient[3].arguments == {"x": 2}
    assert hermes_blocks("no call") == [] and hermes_blocks("<a>{}</a>", tag="a")[0].payload == {}


def test_unclosed_tags_and_the_written_form():
    assert unclosed_tags("<tool_call>{}</tool_call><tool_call>{") == 1
    assert unclosed_tags("</tool_call>") == 0
    text = hermes_call_text("calc", {"x": 2})
    assert hermes_blocks(text)[0].payload == {"name": "calc", "arguments": {"x": 2}}


def test_the_readers_agree():
    assert parse_tool_call(REPLY) == ("get_weather", {"city": "Oslo"}, False)
    content, calls = parse_hermes(REPLY)
    assert content == "Let me look."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"})
    ]

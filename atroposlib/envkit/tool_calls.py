"""Hermes-format tool calling: parsing, comparison with a reference, and a small offline tool box.

A call is ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in the assistant's text (after any
thinking block). Malformed calls are never dropped silently: ``parse_tool_calls`` returns them as
``errors`` with a reason (unclosed tag, bad JSON, missing name, arguments not an object), and the
environments score a response with any error as a failure and keep the reason in the group's messages.
The blocks are read by atroposlib's one Hermes parser (``atroposlib.utils.tool_call_parser``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.envkit.math_scoring import strip_thinking
from atroposlib.envkit.offline_tools import (
    _CONVERSIONS,
    WEATHER_C,
    calculator,
    convert_units,
    get_weather,
)
from atroposlib.utils.tool_call_parser import hermes_calls


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def key(self) -> str:
        """Canonical text of the call: argument order, whitespace inside strings and ``10`` vs ``10.0``
        do not matter."""
        return json.dumps(
            {"name": self.name, "arguments": _canonical(self.arguments)}, sort_keys=True
        )


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return "".join(value.split())
    return value


@dataclass
class ToolCallParse:
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_tool_calls(text: str) -> ToolCallParse:
    """All ``<tool_call>`` blocks after the thinking block, with a reason for each malformed one
    (the rules of ``atroposlib.utils.tool_call_parser.hermes_calls``)."""
    calls, errors = hermes_calls(strip_thinking(text))
    return ToolCallParse(
        [ToolCall(c.name, c.arguments) for c in calls], [e.message for e in errors]
    )


def compare_tool_calls(
    predicted: ToolCallParse, reference: Sequence[ToolCall]
) -> tuple[float, str]:
    """Score in [0, 1] and a reason: the share of reference calls matched (order-free), with extra or
    malformed calls counting against it; 1.0 only for an exact set of well-formed calls."""
    if predicted.errors:
        return 0.0, "; ".join(predicted.errors)
    if not predicted.calls:
        return 0.0, "no tool call"
    wanted = [call.key() for call in reference]
    matched = 0
    for call in predicted.calls:
        if call.key() in wanted:
            wanted.remove(call.key())
            matched += 1
    score = matched / max(len(predicted.calls), len(reference))
    reason = (
        "exact match" if score == 1.0 else f"{matched} of {len(reference)} reference calls matched"
    )
    return score, reason


# ------------------------------------------------------------------------------------------------
# An offline tool box: deterministic tools with JSON-schema signatures
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., dict[str, Any]]

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _params(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": t} for k, t in props.items()},
        "required": list(props),
    }


TOOLBOX: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool(
            "calculator",
            "Evaluate an arithmetic expression with + - * /.",
            _params(expression="string"),
            calculator,
        ),
        Tool(
            "get_weather",
            "Current temperature in Celsius for a city.",
            _params(city="string"),
            get_weather,
        ),
        Tool(
            "convert_units",
            "Convert km/mi, kg/lb or c/f.",
            _params(value="number", from_unit="string", to_unit="string"),
            convert_units,
        ),
    ]
}


def hermes_system_prompt(tools: Sequence[Tool]) -> str:
    """The Hermes function-calling system prompt listing ``tools``."""
    signatures = "\n".join(json.dumps(t.schema()) for t in tools)
    return (
        "You are a function calling AI model. You are provided with function signatures within "
        f"<tools></tools> XML tags.\n<tools>\n{signatures}\n</tools>\n"
        "For each function call return a JSON object with the function name and arguments within "
        '<tool_call></tool_call> XML tags, like:\n<tool_call>\n{"name": <function-name>, '
        '"arguments": <args-dict>}\n</tool_call>'
    )


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tool_schema_problem(tool: Tool) -> Optional[str]:
    """Why ``tool``'s schema cannot be offered to a model in the Hermes format, or None: its name must
    be 1-64 letters, digits, ``_`` or ``-`` (what OpenAI and the chat templates accept), its
    ``parameters`` a JSON-schema object (``"type": "object"`` with a ``properties`` object), and the
    whole schema JSON-serializable."""
    if not isinstance(tool.name, str) or not _TOOL_NAME.match(tool.name):
        return f"tool name {tool.name!r} must be 1-64 letters, digits, '_' or '-'"
    params = tool.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        return f'tool {tool.name!r}: "parameters" must be a JSON-schema object ("type": "object")'
    if not isinstance(params.get("properties", {}), dict):
        return f'tool {tool.name!r}: "parameters.properties" must be an object'
    try:
        json.dumps(tool.schema())
    except (TypeError, ValueError) as exc:
        return f"tool {tool.name!r}: its schema is not JSON ({exc})"
    return None


def template_renders_tools(tokenizer: Any, tools: Sequence[Tool]) -> bool:
    """Whether the tokenizer's chat template lists ``tools=`` in the prompt itself (Qwen2.5, Hermes
    templates do; plain ChatML templates such as SmolLM2's ignore them, and then the env must put
    the tools in its system prompt)."""
    probe = [{"role": "user", "content": "?"}]
    try:
        with_tools = tokenizer.apply_chat_template(
            probe, tokenize=False, add_generation_prompt=True, tools=[t.schema() for t in tools]
        )
    except Exception:  # a template that cannot take tools at all
        return False
    plain = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    return with_tools != plain and all(t.name in with_tools for t in tools)


def execute_call(call: ToolCall, toolbox: dict[str, Tool] = TOOLBOX) -> tuple[bool, str]:
    """Run a call; (ok, JSON text for the ``<tool_response>``). Tool errors are reported, not raised."""
    tool = toolbox.get(call.name)
    if tool is None:
        return False, json.dumps({"error": f"unknown tool {call.name!r}"})
    try:
        return True, json.dumps(tool.function(**call.arguments))
    except (TypeError, ValueError, SyntaxError, ZeroDivisionError) as exc:
        return False, json.dumps({"error": f"{type(exc).__name__}: {exc}"})


# ------------------------------------------------------------------------------------------------
# Procedural tasks
# ------------------------------------------------------------------------------------------------
def single_turn_task(
    rng: random.Random, tools: Sequence[str] = ("get_weather", "convert_units", "calculator")
) -> dict[str, Any]:
    """``{"question", "reference": [ToolCall]}`` answerable by exactly one call to one of ``tools``."""
    kind = rng.choice(list(tools))
    if kind == "get_weather":
        city = rng.choice(sorted(WEATHER_C))
        return {
            "question": f"What is the weather in {city} right now?",
            "reference": [ToolCall("get_weather", {"city": city})],
        }
    if kind == "convert_units":
        value, (src, dst) = rng.randint(1, 200), rng.choice(sorted(_CONVERSIONS))
        return {
            "question": f"Convert {value} {src} to {dst}.",
            "reference": [
                ToolCall("convert_units", {"value": value, "from_unit": src, "to_unit": dst})
            ],
        }
    a, b = rng.randint(10, 999), rng.randint(10, 999)
    return {
        "question": f"Use the calculator to compute {a} * {b}.",
        "reference": [ToolCall("calculator", {"expression": f"{a} * {b}"})],
    }


def multi_turn_task(rng: random.Random) -> dict[str, Any]:
    """``{"question", "answer"}`` needing two tool calls (weather, then a conversion)."""
    city = rng.choice(sorted(WEATHER_C))
    fahrenheit = convert_units(WEATHER_C[city], "c", "f")["value"]
    return {
        "question": f"What is the temperature in {city} in Fahrenheit? Use the tools, then give the "
        "number inside <answer></answer> tags.",
        "answer": fahrenheit,
    }

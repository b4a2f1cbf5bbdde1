"""The offline tool box's functions (calculator, weather, unit conversion) and the text a tool call
sends back to the model.

Standard library only, and nothing of atroposlib: ``envkit.tool_calls`` wraps them in ``Tool``
schemas, and a process that cannot import atroposlib (TRL's side of ``bench/trl_comparison.py``, in
its own environment) loads this file by its path, so both stacks run the same tool and send the
model the same text.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from typing import Any, Optional

_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / are allowed")


def calculator(expression: str) -> dict[str, Any]:
    value = _evaluate(ast.parse(expression, mode="eval").body)
    return {"result": round(value, 6)}


WEATHER_C = {"Paris": 18, "Oslo": 4, "Cairo": 31, "Lima": 22, "Tokyo": 15, "Denver": 9}


def get_weather(city: str) -> dict[str, Any]:
    if city not in WEATHER_C:
        raise ValueError(f"unknown city {city!r}; known: {', '.join(sorted(WEATHER_C))}")
    return {"city": city, "temperature_c": WEATHER_C[city]}


_CONVERSIONS = {
    ("km", "mi"): lambda v: v * 0.621371,
    ("mi", "km"): lambda v: v / 0.621371,
    ("kg", "lb"): lambda v: v * 2.20462,
    ("lb", "kg"): lambda v: v / 2.20462,
    ("c", "f"): lambda v: v * 9 / 5 + 32,
    ("f", "c"): lambda v: (v - 32) * 5 / 9,
}


def convert_units(value: float, from_unit: str, to_unit: str) -> dict[str, Any]:
    pair = (from_unit.lower(), to_unit.lower())
    if pair not in _CONVERSIONS:
        raise ValueError(f"cannot convert {from_unit} to {to_unit}")
    return {"value": round(_CONVERSIONS[pair](float(value)), 2), "unit": to_unit}


def call_response(
    function: Callable[..., Any], arguments: Mapping[str, Any]
) -> tuple[str, Optional[str]]:
    """(the JSON text a call of ``function`` sends back, the error's kind or None). Nothing it raises
    escapes: a tool's failure is the model's information (``{"error": "Kind: message"}``, cut at 300
    characters), not the caller's crash."""
    try:
        return json.dumps(function(**arguments)), None
    except Exception as exc:
        kind = type(exc).__name__
        return json.dumps({"error": f"{kind}: {exc}"[:300]}), kind


def wrapped_response(text: str) -> str:
    """A tool's response as it goes back to a chat template that does not render tool turns itself
    (SmolLM2's): inside ``<tool_response>`` tags."""
    return f"<tool_response>{text}</tool_response>"

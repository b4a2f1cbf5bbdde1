"""Pull one tool call out of a model's reply (Atropos's ``parse_tool_call``).

A tool call is a JSON object ``{"name": ..., "arguments": {...}}`` between ``<tool_call>`` tags (or
other tag names you pass). ``parse_tool_call`` never raises: a reply without a usable call gives
``("-ERROR-", {}, True)`` so that a reward function can score it as a format failure.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, Optional

logger = logging.getLogger(__name__)

ERROR_NAME = "-ERROR-"


def extract_tool_call(text: str, preferred_tags: Optional[Sequence[str]] = None) -> Optional[str]:
    """The stripped text inside the first ``<tag>...</tag>`` pair, trying tags in order."""
    for tag in preferred_tags or ("tool_call",):
        found = re.search(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.DOTALL)
        if found:
            return found.group(1).strip()
    return None


def _tool_names(available_tools: Sequence[Any]) -> set[str]:
    names: set[str] = set()
    for tool in available_tools:
        if not isinstance(tool, dict):
            continue
        if "name" in tool:
            names.add(str(tool["name"]))
        elif isinstance(tool.get("function"), dict) and "name" in tool["function"]:
            names.add(str(tool["function"]["name"]))
    return names


def parse_tool_call(
    response: str,
    available_tools: Optional[Sequence[dict[str, Any]]] = None,
    preferred_tags: Optional[Sequence[str]] = None,
) -> tuple[str, dict[str, Any], bool]:
    """``(tool_name, arguments, is_error)`` for the first tool call in ``response``.

    Single quotes are read as double quotes (models often write Python-style dicts). When
    ``available_tools`` is given (plain ``{"name": ...}`` or OpenAI ``{"function": {"name": ...}}``
    entries), a call to any other tool is an error that still returns its arguments."""
    body = extract_tool_call(response or "", preferred_tags)
    if not body:
        logger.debug("no tool call found in response %.80r", response)
        return ERROR_NAME, {}, True
    try:
        call = json.loads(body.replace("'", '"'), strict=False)
    except json.JSONDecodeError as e:
        logger.debug("tool call is not JSON (%s): %.80r", e, body)
        return ERROR_NAME, {}, True
    if not isinstance(call, dict):
        return ERROR_NAME, {}, True
    name = call.get("name", "")
    arguments = call.get("arguments", {})
    if not isinstance(name, str):
        return ERROR_NAME, {}, True
    if available_tools and (not name or name not in _tool_names(available_tools)):
        return ERROR_NAME, arguments, True
    return name, arguments, False


__all__ = ["ERROR_NAME", "extract_tool_call", "parse_tool_call"]

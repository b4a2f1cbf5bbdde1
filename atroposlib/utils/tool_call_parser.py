"""The one Hermes tool-call parser: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

``hermes_blocks`` reads every block of a reply in order and decodes each as a JSON object, or says why
it is not one; ``hermes_calls`` applies the rules of a call on top (see its docstring: they are the
rules docs/environments.md documents) and gives every block as a call or as an error with its kind;
``hermes_call_text`` writes a call back as the text a model writes. Everything that reads
tool calls builds on these: Atropos's ``parse_tool_call`` below (the first call, for reward
functions), the inference clients' ``ToolCallTranslator`` (OpenAI ``tool_calls`` both ways) and the
``atroposlib.envkit.tool_calls`` (every call, with a reason for each malformed one).

``parse_tool_call`` (Atropos's name) never raises: a reply without a usable call gives
``("-ERROR-", {}, True)`` so that a reward function can score it as a format failure.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

logger = logging.getLogger(__name__)

ERROR_NAME = "-ERROR-"
TOOL_CALL_TAG = "tool_call"


@dataclass(frozen=True)
class HermesBlock:
    """One ``<tag>...</tag>`` block: its stripped ``text`` and the JSON object in it, or the ``error``
    saying why there is none."""

    text: str
    payload: Optional[dict[str, Any]] = None
    error: Optional[str] = None

    @property
    def name(self) -> Optional[str]:
        """The call's ``name`` when it is a string (possibly empty), else None."""
        name = self.payload.get("name") if self.payload is not None else None
        return name if isinstance(name, str) else None

    @property
    def arguments(self) -> Any:
        """The call's ``arguments`` as written (an object, or OpenAI's JSON-encoded string); ``{}`` if absent."""
        return self.payload.get("arguments", {}) if self.payload is not None else {}


def _pattern(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL)


def hermes_blocks(text: str, tag: str = TOOL_CALL_TAG, lenient: bool = False) -> list[HermesBlock]:
    """Every ``<tag>...</tag>`` block of ``text``, in order, decoded as a JSON object.

    ``lenient``: single quotes are read as double quotes (models often write Python-style dicts) and
    control characters may appear inside strings."""
    blocks: list[HermesBlock] = []
    for raw in _pattern(tag).findall(text):
        body = raw.strip()
        try:
            payload = (
                json.loads(body.replace("'", '"'), strict=False) if lenient else json.loads(body)
            )
        except json.JSONDecodeError as exc:
            blocks.append(HermesBlock(body, error=f"invalid JSON ({exc.msg} at char {exc.pos})"))
            continue
        if not isinstance(payload, dict):
            blocks.append(
                HermesBlock(body, error=f"expected a JSON object, got {type(payload).__name__}")
            )
            continue
        blocks.append(HermesBlock(body, payload=payload))
    return blocks


@dataclass(frozen=True)
class HermesCall:
    """A well-formed call: its ``name``, its ``arguments`` (a JSON object) and the block as written."""

    name: str
    arguments: dict[str, Any]
    raw: str


@dataclass(frozen=True)
class HermesError:
    """A ``<tool_call>`` block that is not a call: ``kind`` (one of ``ERROR_KINDS``), a one-line
    ``message`` saying why (``tool call 1: invalid JSON (...)``), the block as written (``raw``) and
    its position among the reply's blocks (``index``; None for an unclosed tag)."""

    kind: str
    message: str
    raw: str
    index: Optional[int] = None


ERROR_KINDS = (
    "invalid JSON",
    "not an object",
    "missing name",
    "arguments not JSON",
    "arguments not an object",
    "unclosed tag",
)
"""Why a block is not a call (see ``hermes_calls``)."""


def hermes_calls(text: str, tag: str = TOOL_CALL_TAG) -> tuple[list[HermesCall], list[HermesError]]:
    """Every ``<tag>...</tag>`` block of ``text``, in order, as a call or as an error.

    A block is a call when its text (stripped) is a JSON object (strict JSON: double quotes) with a
    non-empty string ``"name"`` and ``"arguments"`` that is absent (read as ``{}``), a JSON object,
    or a string holding a JSON object (OpenAI's encoding). Any other block is an error of one of
    ``ERROR_KINDS``; an opening tag without a closing one is an ``unclosed tag`` error holding the
    text from that tag to the end. Nothing is dropped: every block is in one list or the other."""
    calls: list[HermesCall] = []
    errors: list[HermesError] = []
    written = _pattern(tag).findall(text)
    for index, (block, inner) in enumerate(zip(hermes_blocks(text, tag), written, strict=True)):
        checked = _as_call(block, f"<{tag}>{inner}</{tag}>", index)
        if isinstance(checked, HermesCall):
            calls.append(checked)
        else:
            errors.append(checked)
    unclosed = unclosed_tags(text, tag)
    if unclosed > 0:
        start = text.rfind(f"<{tag}>")
        errors.append(
            HermesError(
                "unclosed tag", f"{unclosed} <{tag}> tag(s) never closed", text[max(start, 0) :]
            )
        )
    return calls, errors


def _as_call(block: HermesBlock, raw: str, index: int) -> Union[HermesCall, HermesError]:
    def error(kind: str, why: str) -> HermesError:
        return HermesError(kind, f"tool call {index}: {why}", raw, index)

    if block.payload is None:
        why = block.error or "not a call"
        return error("invalid JSON" if why.startswith("invalid JSON") else "not an object", why)
    name = block.name
    if not name:
        return error("missing name", 'missing or empty "name"')
    arguments = block.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return error("arguments not JSON", f'"arguments" string is not JSON ({exc.msg})')
    if not isinstance(arguments, dict):
        return error("arguments not an object", '"arguments" must be an object')
    return HermesCall(name, arguments, raw)


def unclosed_tags(text: str, tag: str = TOOL_CALL_TAG) -> int:
    """How many ``<tag>`` openings have no closing tag."""
    return max(0, text.count(f"<{tag}>") - text.count(f"</{tag}>"))


def hermes_call_text(name: str, arguments: Any) -> str:
    """The text a Hermes model writes for one call."""
    return (
        f"<{TOOL_CALL_TAG}>{json.dumps({'name': name, 'arguments': arguments})}</{TOOL_CALL_TAG}>"
    )


def extract_tool_call(text: str, preferred_tags: Optional[Sequence[str]] = None) -> Optional[str]:
    """The stripped text inside the first ``<tag>...</tag>`` pair, trying tags in order."""
    for tag in preferred_tags or (TOOL_CALL_TAG,):
        found = _pattern(tag).search(text)
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

    The first tag of ``preferred_tags`` that occurs is used, and its first block; it is read
    leniently (see ``hermes_blocks``). When ``available_tools`` is given (plain ``{"name": ...}`` or
    OpenAI ``{"function": {"name": ...}}`` entries), a call to any other tool is an error that still
    returns its arguments."""
    block: Optional[HermesBlock] = None
    for tag in preferred_tags or (TOOL_CALL_TAG,):
        found = hermes_blocks(response or "", tag, lenient=True)
        if found:
            block = found[0]
            break
    if block is None:
        logger.debug("no tool call found in response %.80r", response)
        return ERROR_NAME, {}, True
    if block.payload is None:
        logger.debug("tool call is not a JSON object (%s): %.80r", block.error, block.text)
        return ERROR_NAME, {}, True
    name = block.payload.get("name", "")
    arguments = block.arguments
    if not isinstance(name, str):
        return ERROR_NAME, {}, True
    if available_tools and (not name or name not in _tool_names(available_tools)):
        return ERROR_NAME, arguments, True
    return name, arguments, False


__all__ = [
    "ERROR_KINDS",
    "ERROR_NAME",
    "TOOL_CALL_TAG",
    "HermesBlock",
    "HermesCall",
    "HermesError",
    "extract_tool_call",
    "hermes_blocks",
    "hermes_call_text",
    "hermes_calls",
    "parse_tool_call",
    "unclosed_tags",
]

"""Request bodies as JSON: orjson first, the stdlib parser as the lenient fallback, lone UTF-16
surrogates repaired (or refused, in ids), and a bound on how deeply a stored document nests.

Python's ``json.dumps`` writes a broken string as a lone surrogate escape (``"\\ud83d"``), which orjson
(and so every trainer) refuses to read. Where such a body is accepted, its strings are repaired to
U+FFFD before it is stored, so whatever is accepted can be delivered. An id cannot be repaired that
way: ``"a\\ud83d"`` and ``"a\\udc00"`` would both become ``"a\\ufffd"``, and the second group would be
taken for a retry of the first and never delivered; an id holding a lone surrogate is a 422.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from atroposlib.errors import ApiProblem


def parse_json(body: bytes) -> Any:
    """orjson parse; NaN/Infinity literals (which Python's json writes) fall back to the stdlib parser
    so that validation can name the offending field instead of a bare syntax error."""
    if not body:
        raise ApiProblem(422, "request body is empty; a JSON document is required")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ApiProblem(422, f"request body is not valid JSON: {e}") from None
        except RecursionError:
            raise ApiProblem(422, "request body is nested too deeply") from None


def parse_json_exact(body: bytes, ids: Sequence[str] = ()) -> tuple[Any, bool]:
    """``parse_json`` and whether ``body`` itself is deliverable as stored: False when only the
    lenient stdlib parser could read it (NaN literals, lone UTF-16 surrogates such as ``"\\ud83d"``,
    which orjson, and so every trainer, refuses). Then the data has its lone surrogates replaced by
    U+FFFD and must be stored re-serialized, never as received; first, the keys named in ``ids`` (of
    the object, or of each object of a list) are refused with 422 if they hold one."""
    if not body:
        raise ApiProblem(422, "request body is empty; a JSON document is required")
    try:
        return orjson.loads(body), True
    except orjson.JSONDecodeError as e:
        first = e
    if "recursion" in str(first).lower():
        raise ApiProblem(422, f"request body is nested too deeply: {first}")
    data = parse_json(body)
    refuse_lone_surrogates_in(data, ids)
    return replace_lone_surrogates(data), False


def has_lone_surrogate(value: str) -> bool:
    """Whether ``value`` holds a lone UTF-16 surrogate (it then cannot be written as UTF-8)."""
    try:
        value.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def refuse_lone_surrogates_in(data: Any, ids: Sequence[str]) -> None:
    """422 naming the first of the ``ids`` keys (of ``data``, or of each object of a list) whose
    string holds a lone surrogate."""
    if not ids:
        return
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        for key in ids:
            value = item.get(key)
            if isinstance(value, str) and has_lone_surrogate(value):
                where = f"[{i}].{key}" if isinstance(data, list) else key
                shown = value.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                raise ApiProblem(
                    422,
                    f"invalid request: {where} {shown!r} holds a lone UTF-16 surrogate; an id must "
                    "be valid Unicode (repaired, two different ids could become one)",
                )


def replace_lone_surrogates(data: Any) -> Any:
    """``data`` with every str holding a lone surrogate repaired (U+FFFD); iterative, any depth."""

    def fix(v: str) -> str:
        return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    def bad(v: Any) -> bool:
        return isinstance(v, str) and has_lone_surrogate(v)

    if isinstance(data, str):
        return fix(data) if bad(data) else data
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k in list(node):
                v = node[k]
                if bad(k):
                    del node[k]
                    k = fix(k)
                    node[k] = v
                if bad(v):
                    node[k] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if bad(v):
                    node[i] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
    return data


def nesting_depth(value: Any, stop_at: int) -> int:
    """How many container levels ``value`` has (a scalar: 0), counted up to ``stop_at``; iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        deepest = max(deepest, depth)
        if deepest >= stop_at:
            return deepest
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


__all__ = [
    "has_lone_surrogate",
    "nesting_depth",
    "parse_json",
    "parse_json_exact",
    "refuse_lone_surrogates_in",
    "replace_lone_surrogates",
]

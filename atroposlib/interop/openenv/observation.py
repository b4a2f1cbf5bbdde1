"""What the model reads of an OpenEnv observation: one of its fields as text.

OpenEnv observations are the env's own pydantic models (``done``, ``reward`` and ``metadata`` travel
beside them), so which field is the text differs per env. ``--openenv.observation_field`` names it;
without it the first of ``TEXT_FIELDS`` that holds a string is used, then the last message of a
``messages`` list, then the only string field, and otherwise the whole observation as JSON.
"""

from __future__ import annotations

import json
from typing import Any, Optional

TEXT_FIELDS = (
    "prompt",
    "message",
    "text",
    "content",
    "question",
    "instruction",
    "feedback",
    "observation",
    "output",
    "result",
    "echoed_message",
)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def observation_text(observation: dict[str, Any], field: Optional[str] = None) -> str:
    """The text of ``observation`` (``KeyError`` when the named ``field`` is absent)."""
    if field is not None:
        if field not in observation:
            raise KeyError(field)
        return _as_text(observation[field])
    for name in TEXT_FIELDS:
        if isinstance(observation.get(name), str):
            return str(observation[name])
    messages = observation.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
    strings = [v for k, v in observation.items() if isinstance(v, str) and k != "metadata"]
    if len(strings) == 1:
        return str(strings[0])
    rest = {k: v for k, v in observation.items() if k != "metadata"}
    return _as_text(rest)


__all__ = ["TEXT_FIELDS", "observation_text"]

"""Reading inference servers' answers: OpenAI objects from JSON, several answers as one, and the
error for a 4xx answer."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ValidationError

from atroposlib.errors import InferenceError, InferenceRejected


def rejected(base_url: str, model: Any, status: int, detail: str) -> InferenceRejected:
    """The error for a 4xx answer, with a hint at the flag to check when retrying cannot help."""
    hint = ""
    if status == 404:
        hint = f" (is --openai.model_name {model!r} served there? its /v1/models lists the names)"
    elif status in (401, 403):
        hint = " (check --openai.api_key)"
    return InferenceRejected(
        status, f"inference server {base_url} answered {status}: {detail.strip()[:300]}{hint}"
    )


def to_openai(cls: type[BaseModel], data: dict[str, Any]) -> Any:
    """Validate a JSON answer as an OpenAI object, tolerating vLLM/SGLang finish reasons."""
    try:
        return cls.model_validate(data)
    except ValidationError:
        for ch in data.get("choices") or []:
            if ch.get("finish_reason") not in (
                "stop",
                "length",
                "content_filter",
                "tool_calls",
                "function_call",
            ):
                ch["finish_reason"] = "length" if ch.get("finish_reason") == "length" else "stop"
            ch.setdefault("logprobs", None)
        data.setdefault("created", int(time.time()))
        data.setdefault("id", "cmpl-local")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise InferenceError(
                f"server answered a malformed {cls.__name__}: {e.errors()[0]}"
            ) from None


def merge_choices(answers: list[Any]) -> Any:
    """The first answer holding the choices of all (renumbered in order): what one request for
    ``n`` completions gets when it was sent as several smaller requests."""
    out = answers[0]
    for answer in answers[1:]:
        out.choices.extend(answer.choices)
    for i, choice in enumerate(out.choices):
        choice.index = i
    return out


__all__ = ["merge_choices", "rejected", "to_openai"]

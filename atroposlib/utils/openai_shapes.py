"""The JSON shape of an OpenAI completion / chat completion answer, written in one place.

Every server of ours that answers in OpenAI's shape builds it here: the CPU engine's HTTP server,
the managed server and its proxy, the scripted backend and the test doubles. ``kind`` is the answer's
``object``: ``"text_completion"`` (choices hold ``text``) or ``"chat.completion"`` (choices hold an
assistant ``message``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, Optional

AnswerKind = Literal["text_completion", "chat.completion"]


def openai_choice(
    kind: AnswerKind, index: int, text: Optional[str], finish_reason: str, **extra: Any
) -> dict[str, Any]:
    """One choice: ``index``, the ``text`` (or assistant ``message``; its content may be None when
    the message only calls tools), ``finish_reason``, ``logprobs: None`` and the ``extra`` fields
    (which may replace ``logprobs``)."""
    body: dict[str, Any] = (
        {"text": text}
        if kind == "text_completion"
        else {"message": {"role": "assistant", "content": text}}
    )
    return {"index": index, **body, "finish_reason": finish_reason, "logprobs": None, **extra}


def token_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """The ``usage`` block of an answer."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def openai_response(
    kind: AnswerKind,
    model: str,
    choices: list[dict[str, Any]],
    usage: Optional[dict[str, int]] = None,
) -> dict[str, Any]:
    """The envelope of an answer around its ``choices``: a fresh ``id``, ``object``, ``created``,
    ``model`` and, when given, ``usage``."""
    prefix = "cmpl" if kind == "text_completion" else "chatcmpl"
    body: dict[str, Any] = {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


__all__ = ["AnswerKind", "openai_choice", "openai_response", "token_usage"]

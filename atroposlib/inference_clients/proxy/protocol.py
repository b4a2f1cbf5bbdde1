"""The request bodies the proxy accepts: a chat completion (the OpenAI fields agent frameworks send)
and a session's creation.

A body that does not validate is a 400 naming the field (``http.py``). Every number is bounded (no
NaN or infinity, integers within what the backends take), and every text is checked for lone
surrogates, which no tokenizer can encode. Fields outside the model are kept (``extra="allow"``)
so that the request translation can refuse them by name rather than drop them.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_INT32 = 2**31 - 1
SEED_BOUND = 2**62
"""Seeds are within +-2**62: a backend seeds choice ``i`` with ``seed + i`` in a 64-bit integer."""


def lone_surrogate_at(value: Any, where: str = "") -> Optional[str]:
    """The path of the first text in ``value`` (a JSON value) holding a lone surrogate, else None."""
    if isinstance(value, str):
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            return where or "body"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = lone_surrogate_at(key, where) or lone_surrogate_at(
                item, f"{where}.{key}" if where else str(key)
            )
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = lone_surrogate_at(item, f"{where}[{i}]")
            if found:
                return found
    return None


class _Checked(BaseModel):
    """No NaN or infinity anywhere, no lone surrogate in any text."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        where = lone_surrogate_at(data)
        if where:
            raise ValueError(f"{where}: a lone surrogate (U+D800..U+DFFF) cannot be tokenized")
        return data


class ChatMessage(BaseModel):
    """One message; ``content`` is a string or a list of ``{"type": "text", "text": ...}`` parts."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    role: str
    content: Optional[Union[str, list[dict[str, Any]]]] = None
    tool_calls: Optional[list[dict[str, Any]]] = None
    tool_call_id: Optional[str] = None
    name: Optional[str] = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    include_usage: Optional[bool] = Field(
        default=None, description="Send a last chunk with the usage of the whole request."
    )


class ChatCompletionProxyRequest(_Checked):
    """Body of ``POST /{uuid}/v1/chat/completions`` (see docs/interop.md, "Bring your own agent")."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    messages: list[ChatMessage] = Field(description="The conversation so far.")
    model: Optional[str] = Field(
        default=None, description="The served model's name (GET /v1/models); any other is a 404."
    )
    max_tokens: Optional[int] = Field(default=None, ge=1, le=MAX_INT32)
    max_completion_tokens: Optional[int] = Field(
        default=None, ge=1, le=MAX_INT32, description="Same as max_tokens."
    )
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: Optional[float] = Field(default=None, gt=0.0, le=1.0)
    top_k: Optional[int] = Field(default=None, ge=-1, le=MAX_INT32)
    seed: Optional[int] = Field(default=None, ge=-SEED_BOUND, le=SEED_BOUND)
    presence_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: Optional[float] = Field(default=None, ge=-2.0, le=2.0)
    n: int = Field(default=1, ge=1, le=MAX_INT32)
    stop: Optional[Union[str, list[str]]] = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    logprobs: Optional[bool] = None
    top_logprobs: Optional[int] = Field(default=None, ge=0, le=20)
    tools: Optional[list[dict[str, Any]]] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    parallel_tool_calls: Optional[bool] = None
    response_format: Optional[dict[str, Any]] = None
    user: Optional[str] = Field(default=None, description="Accepted; it changes nothing.")
    metadata: Optional[dict[str, Any]] = Field(
        default=None, description="Accepted; it changes nothing."
    )
    store: Optional[bool] = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, v: Any) -> Optional[list[str]]:
        if v is None:
            return None
        items = [v] if isinstance(v, str) else list(v)
        if any(not s for s in items):
            raise ValueError("stop strings must be non-empty")
        return items or None

    @property
    def token_budget(self) -> Optional[int]:
        """What the client allows for the reply (``max_completion_tokens`` or ``max_tokens``)."""
        return self.max_completion_tokens or self.max_tokens


class SessionCreateRequest(_Checked):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    tool_parser: str = "hermes"
    track_tree: bool = False
    base_url: Optional[str] = None
    max_turns: Optional[int] = Field(
        default=None,
        ge=1,
        le=MAX_INT32,
        description="Chat completions the session serves; the next one is a 400 (an agent harness's "
        "turn limit). None: no limit.",
    )


__all__ = [
    "ChatCompletionProxyRequest",
    "ChatMessage",
    "MAX_INT32",
    "SEED_BOUND",
    "SessionCreateRequest",
    "StreamOptions",
    "lone_surrogate_at",
]

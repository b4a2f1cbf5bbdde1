"""The request bodies the proxy accepts: a chat completion (OpenAI's fields the proxy reads) and
a session's creation."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field


class ChatMessage(BaseModel):
    role: str
    content: Optional[str] = None
    tool_calls: Optional[list[dict]] = None
    tool_call_id: Optional[str] = None
    name: Optional[str] = None


class ChatCompletionProxyRequest(BaseModel):
    messages: list[ChatMessage]
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=1.0, ge=0.0)
    n: int = Field(default=1, ge=1)
    stop: Optional[list[str]] = None
    tools: Optional[list[dict]] = None
    tool_choice: Optional[Any] = None


class SessionCreateRequest(BaseModel):
    tool_parser: str = "hermes"
    track_tree: bool = False
    base_url: Optional[str] = None


__all__ = ["ChatCompletionProxyRequest", "ChatMessage", "SessionCreateRequest"]

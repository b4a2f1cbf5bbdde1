"""Atropos's module path of the managed-server proxy; it lives in ``atroposlib.inference_clients.proxy``."""

from atroposlib.inference_clients.proxy.app import create_app
from atroposlib.inference_clients.proxy.http import openai_error
from atroposlib.inference_clients.proxy.protocol import (
    ChatCompletionProxyRequest,
    ChatMessage,
    SessionCreateRequest,
)
from atroposlib.inference_clients.proxy.sessions import SessionState

__all__ = [
    "ChatCompletionProxyRequest",
    "ChatMessage",
    "SessionCreateRequest",
    "SessionState",
    "create_app",
    "openai_error",
]

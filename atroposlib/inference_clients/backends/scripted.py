"""The scripted backend: ``ScriptedServer``, the in-process backend of ``--testing`` mode (a fixed
text, no HTTP).

It is part of the runtime (``ServerManager(testing=True)`` builds one), not a test double; the
test doubles live in ``atroposlib.testing``. No ``server_type`` names it, so it is not in the
registry.
"""

from __future__ import annotations

from typing import Any

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.inference_clients.answers import to_openai
from atroposlib.inference_clients.backend import APIServer
from atroposlib.inference_clients.config import APIServerConfig


class ScriptedServer(APIServer):
    """In-process stand-in used by ``--testing``: answers every request with a fixed text, no HTTP."""

    def __init__(self, text: str = "This is a scripted test response.") -> None:
        super().__init__(APIServerConfig(base_url="", model_name="scripted", health_check=False))
        self.text = text

    async def _request_chat(self, kwargs: dict[str, Any]) -> ChatCompletion:
        n = int(kwargs.get("n", 1) or 1)
        return _to_openai_chat(self.text, n, kwargs.get("model", "scripted"))

    async def _request_completion(self, kwargs: dict[str, Any]) -> Completion:
        n = int(kwargs.get("n", 1) or 1)
        return to_openai(
            Completion,
            {
                "id": "scripted",
                "object": "text_completion",
                "created": 0,
                "model": "scripted",
                "choices": [
                    {"index": i, "text": self.text, "finish_reason": "stop", "logprobs": None}
                    for i in range(n)
                ],
            },
        )


def _to_openai_chat(text: str, n: int, model: str) -> ChatCompletion:
    return to_openai(
        ChatCompletion,
        {
            "id": "scripted",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": i,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text},
                }
                for i in range(n)
            ],
        },
    )


__all__ = ["ScriptedServer"]

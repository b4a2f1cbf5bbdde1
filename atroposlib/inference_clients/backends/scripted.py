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
from atroposlib.utils.openai_shapes import AnswerKind, openai_choice, openai_response


class ScriptedServer(APIServer):
    """In-process stand-in used by ``--testing``: answers every request with a fixed text, no HTTP."""

    def __init__(self, text: str = "This is a scripted test response.") -> None:
        super().__init__(APIServerConfig(base_url="", model_name="scripted", health_check=False))
        self.text = text

    async def _request_chat(self, kwargs: dict[str, Any]) -> ChatCompletion:
        return to_openai(ChatCompletion, self._answer("chat.completion", kwargs))

    async def _request_completion(self, kwargs: dict[str, Any]) -> Completion:
        return to_openai(Completion, self._answer("text_completion", kwargs))

    def _answer(self, kind: AnswerKind, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``n`` choices of the fixed text."""
        n = int(kwargs.get("n", 1) or 1)
        choices = [openai_choice(kind, i, self.text, "stop") for i in range(n)]
        return openai_response(kind, str(kwargs.get("model", "scripted")), choices)


__all__ = ["ScriptedServer"]

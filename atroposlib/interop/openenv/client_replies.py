"""The model is the OpenEnv client: an inference backend whose answers are the client's actions.

When an Atropos env is served as an OpenEnv environment (``serve-openenv``), each of its inference calls
inside an episode becomes a question to the client: the call's prompt is the observation the client
gets, the client's next ``step`` action is the completion the env gets back. The episode's
``EpisodeChannel`` (a context variable, set by the episode's task) carries the questions; the backend
(``ClientReplyServer``) asks them; ``ReplyServerManager`` is the env's ``self.server`` made of it.

Observations: ``prompt`` (the last message's content for chat calls, the prompt text for completions)
and ``messages`` (the whole conversation, for chat calls; also through ``managed_server``, whose chat
calls reach the backend as token ids). Token-level calls get the reply's token ids (plus EOS) with
placeholder logprobs 0.0: nothing here is trained on.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Optional

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceError
from atroposlib.inference_clients.backend import APIServer, TokensAndLogprobs
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.utils.openai_shapes import openai_choice, openai_response


@dataclass
class Question:
    """One inference call waiting for the client: what it shows, where the reply goes."""

    observation: dict[str, Any]
    reply: asyncio.Future[str]


class EpisodeChannel:
    """The questions of one episode's inference calls, in the order the env asks them."""

    def __init__(self) -> None:
        self.questions: asyncio.Queue[Question] = asyncio.Queue()
        # what the env passed to a managed server's call, which reaches the backend as token ids
        self.chat_messages: Optional[list[dict[str, Any]]] = None
        self.prompt_text: Optional[str] = None

    async def ask(self, observation: dict[str, Any]) -> str:
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        await self.questions.put(Question(observation, fut))
        return await fut


CURRENT: contextvars.ContextVar[Optional[EpisodeChannel]] = contextvars.ContextVar(
    "openenv_episode_channel", default=None
)


def _channel() -> EpisodeChannel:
    ch = CURRENT.get()
    if ch is None:
        raise InferenceError(
            "serve-openenv: the env called the model outside an episode (only rollouts' calls "
            "can be answered by the OpenEnv client)"
        )
    return ch


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


class ClientReplyServer(APIServer):
    """The backend whose completions are the OpenEnv client's actions."""

    supports_tokens = True
    tokenizer: Any = None

    async def _replies(self, observation: dict[str, Any], n: int) -> list[str]:
        ch = _channel()
        return [await ch.ask(observation) for _ in range(max(1, n))]

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        messages = [dict(m) for m in kwargs.get("messages") or []]
        obs = {"prompt": _content(messages[-1]) if messages else "", "messages": messages}
        replies = await self._replies(obs, int(kwargs.get("n") or 1))
        choices = [openai_choice("chat.completion", i, r, "stop") for i, r in enumerate(replies)]
        body = openai_response("chat.completion", str(kwargs.get("model", "client")), choices)
        return ChatCompletion.model_validate(body)

    async def completion(self, **kwargs: Any) -> Completion:
        prompt = kwargs.get("prompt")
        text = prompt if isinstance(prompt, str) else self._decode(prompt)
        replies = await self._replies({"prompt": text, "messages": None}, int(kwargs.get("n") or 1))
        choices = [openai_choice("text_completion", i, r, "stop") for i, r in enumerate(replies)]
        body = openai_response("text_completion", str(kwargs.get("model", "client")), choices)
        return Completion.model_validate(body)

    async def tokens_and_logprobs_completion(self, **kwargs: Any) -> TokensAndLogprobs:
        tok = self.tokenizer
        ids = kwargs.get("input_ids")
        if ids is None:
            ids = list(tok.encode(str(kwargs.get("prompt", "")), add_special_tokens=True))
        ch = _channel()
        messages, ch.chat_messages = ch.chat_messages, None
        text, ch.prompt_text = ch.prompt_text, None
        obs: dict[str, Any] = {"prompt": text or self._decode(ids), "messages": None}
        if messages:
            obs = {"prompt": _content(messages[-1]), "messages": messages}
        replies = await self._replies(obs, int(kwargs.get("n") or 1))
        outs, lps = [], []
        for r in replies:
            out = list(tok.encode(r, add_special_tokens=False))
            if tok.eos_token_id is not None:
                out.append(int(tok.eos_token_id))
            outs.append(out)
            lps.append([0.0] * len(out))
        return list(ids), outs, lps, ["stop"] * len(outs)

    def _decode(self, ids: Any) -> str:
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            ids = ids[0]
        return str(self.tokenizer.decode(list(ids or []), skip_special_tokens=False))


class _RecordPrompts:
    """A managed server whose calls leave the env's messages / prompt text for the observation."""

    def __init__(self, managed: Any) -> None:
        self._managed = managed

    async def chat_completion(self, **kwargs: Any) -> Any:
        _channel().chat_messages = [dict(m) for m in kwargs.get("messages") or []]
        return await self._managed.chat_completion(**kwargs)

    async def completion(self, **kwargs: Any) -> Any:
        prompt = kwargs.get("prompt")
        _channel().prompt_text = prompt if isinstance(prompt, str) else None
        return await self._managed.completion(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._managed, name)


class ReplyServerManager(ServerManager):
    """An env's ``self.server`` whose one backend is the OpenEnv client."""

    def __init__(self, tokenizer: Any) -> None:
        config = APIServerConfig(
            server_type="vllm", base_url="", model_name="openenv-client", health_check=False
        )
        super().__init__(config, server_class=ClientReplyServer)
        for server in self.servers:
            if isinstance(server, ClientReplyServer):
                server.tokenizer = tokenizer

    @asynccontextmanager
    async def managed_server(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with super().managed_server(*args, **kwargs) as managed:
            yield _RecordPrompts(managed)


__all__ = [
    "CURRENT",
    "ClientReplyServer",
    "EpisodeChannel",
    "Question",
    "ReplyServerManager",
]

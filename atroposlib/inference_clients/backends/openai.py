"""The ``openai`` backend: any OpenAI-compatible API through the ``openai`` client (text only).

Token ids and logprobs of the prompt are not available through it (use ``vllm`` or ``sglang`` for
token-exact training data); its servers take no new weights from the trainer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

import openai
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceError
from atroposlib.inference_clients.answers import merge_choices, rejected
from atroposlib.inference_clients.backend import APIServer, ServerDown
from atroposlib.inference_clients.config import APIServerConfig

logger = logging.getLogger(__name__)


class OpenAIServer(APIServer):
    """Any OpenAI-compatible API through the ``openai`` client. Text only."""

    def __init__(self, config: APIServerConfig, **kw: Any) -> None:
        super().__init__(config, **kw)
        self._client: Optional[openai.AsyncOpenAI] = None
        self._said_budget = False

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self.config.api_key or "x",
                base_url=self.config.base_url or None,
                timeout=self.config.timeout,
                max_retries=0,
            )
        return self._client

    async def _call(self, create: Any, kwargs: dict[str, Any]) -> Any:
        n = int(kwargs.get("n", 1) or 1)
        try:
            if self.config.n_kwarg_is_ignored and n > 1:
                one = {**kwargs, "n": 1}
                return merge_choices(list(await asyncio.gather(*[create(**one) for _ in range(n)])))
            out = await create(**kwargs)
            self.served_model = getattr(out, "model", None) or self.served_model
            return out
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.InternalServerError,
            openai.RateLimitError,
        ) as e:
            raise ServerDown(str(e)) from e
        except openai.APIStatusError as e:
            if 400 <= e.status_code < 500:
                self.answered += 1
                self.alive_seen = True
                raise rejected(
                    self.config.base_url or "api.openai.com",
                    kwargs.get("model"),
                    e.status_code,
                    e.message,
                ) from None
            raise InferenceError(f"{self.config.base_url}: {e.status_code} {e.message}") from e

    def _add_reasoning(self, kwargs: dict[str, Any]) -> None:
        if self.reasoning.get("reasoning_effort") and "reasoning_effort" not in kwargs:
            kwargs["reasoning_effort"] = self.reasoning["reasoning_effort"]
        if self.reasoning.get("max_reasoning_tokens") and not self._said_budget:
            self._said_budget = True
            logger.warning(
                "max_reasoning_tokens is not sent to server_type openai (its API takes "
                "reasoning_effort, not a token budget)"
            )

    async def _request_chat(self, kwargs: dict[str, Any]) -> ChatCompletion:
        return await self._call(self.client.chat.completions.create, kwargs)

    async def _request_completion(self, kwargs: dict[str, Any]) -> Completion:
        return await self._call(self.client.completions.create, kwargs)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        await super().close()


__all__ = ["OpenAIServer"]

"""Several answers merged as one: a request for ``n`` completions sent as smaller requests."""

from __future__ import annotations

import asyncio

from openai.types.completion import Completion

from atroposlib.inference_clients.answers import merge_choices
from atroposlib.inference_clients.backends.openai import OpenAIServer
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.utils.openai_shapes import openai_choice, openai_response


def _answer(*texts: str) -> Completion:
    choices = [openai_choice("text_completion", i, t, "stop") for i, t in enumerate(texts)]
    return Completion.model_validate(openai_response("text_completion", "m", choices))


def test_merge_choices_keeps_every_choice_in_order_and_renumbers_them():
    merged = merge_choices([_answer("a", "b"), _answer("c"), _answer("d")])
    assert [(c.index, c.text) for c in merged.choices] == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_a_server_that_ignores_n_gets_n_requests_merged_into_one_answer(fake_server):
    config = APIServerConfig(
        base_url=fake_server.base_url,
        model_name="tiny",
        api_key="x",
        server_type="openai",
        n_kwarg_is_ignored=True,
        health_check=False,
    )

    async def go():
        server = OpenAIServer(config)
        try:
            return await server.chat_completion(messages=[{"role": "user", "content": "hi"}], n=3)
        finally:
            await server.close()

    out = asyncio.run(go())
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert [r.get("n") for r in fake_server.requests if "messages" in r] == [1, 1, 1]

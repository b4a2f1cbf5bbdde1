"""The managed-server path against a text-only OpenAI endpoint, under the installed transformers.

transformers 5 returns a ``BatchEncoding`` from ``apply_chat_template(tokenize=True)`` where 4.x
returned a list of ids; the placeholder (text-only) managed server must produce the same tokens
under both. The suite runs this file under transformers 5; the 4.x run is the same file under a
venv with ``transformers<5`` (see docs/coming-from-atropos.md).
"""

from __future__ import annotations

from transformers import AutoTokenizer

from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.server_manager import ServerManager
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from tests.compat.helpers import run_coro


def test_text_only_managed_server_tokens(monkeypatch):
    monkeypatch.setenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", "1")
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    expected_prompt = list(
        tok.encode(
            tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )
    )

    async def run(url: str):
        manager = ServerManager(
            APIServerConfig(base_url=url, model_name="tiny", api_key="x", server_type="openai")
        )
        try:
            async with manager.managed_server(tokenizer=tok) as managed:
                out = await managed.chat_completion(messages=messages, n=2, max_tokens=8)
                return out, managed.get_state()["nodes"]
        finally:
            await manager.close()

    with FakeOpenAIServer(
        tokenizer=tok, responder=lambda p, b: f"It is {b['choice_index']}"
    ) as fake:
        out, nodes = run_coro(run(fake.base_url))
    assert [c.message.content for c in out.choices] == ["It is 0", "It is 1"]
    assert len(nodes) == 2
    for choice, node in zip(out.choices, nodes, strict=True):
        assert all(isinstance(t, int) for t in node.tokens)
        assert node.tokens[: len(expected_prompt)] == expected_prompt
        reply = node.tokens[len(expected_prompt) :]
        assert tok.decode(reply) == choice.message.content
        assert node.masked_tokens == [-100] * len(expected_prompt) + reply

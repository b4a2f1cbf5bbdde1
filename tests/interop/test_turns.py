"""What the OpenEnv and verifiers episodes share (``atroposlib.interop.turns``): the set-up checks
(exact token ids from the inference server, a chat template that renders a multi-turn episode
verbatim) and the prompt of a later turn, with the room left for its reply."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.interop.turns import NextTurn, TurnTemplate, require_exact_tokens
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.utils.tokenizer_loading import load_tokenizer


def _servers(server_type: str) -> ServerManager:
    config = APIServerConfig(
        model_name="m", base_url="http://127.0.0.1:9/v1", api_key="x", server_type=server_type
    )
    return ServerManager([config])


def test_a_plain_openai_server_is_refused_unless_the_dummy_is_allowed(monkeypatch):
    monkeypatch.delenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", raising=False)
    with pytest.raises(ConfigError, match="verifiers episodes are trained on exact token ids"):
        require_exact_tokens(_servers("openai"), "verifiers")
    require_exact_tokens(_servers("vllm"), "verifiers")  # returns token ids: accepted
    monkeypatch.setenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", "1")
    require_exact_tokens(_servers("openai"), "OpenEnv")


def test_a_tokenizer_without_a_chat_template_names_the_flag():
    tok = load_tokenizer(str(tiny_tokenizer_dir()))
    template = TurnTemplate.checked(tok, "be brief", "tiny")
    assert template.after  # the text that opens the next assistant turn
    tok.chat_template = None
    with pytest.raises(ConfigError, match="--env.tokenizer_name tiny: its chat template cannot"):
        TurnTemplate.checked(tok, None, "tiny")


def test_a_later_turn_extends_the_previous_text_and_says_its_room():
    tok = load_tokenizer(str(tiny_tokenizer_dir()))
    template = TurnTemplate(tok, None)
    prompt_ids = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    reply_ids = tok.encode("hello", add_special_tokens=False) + [tok.eos_token_id]
    node = SimpleNamespace(
        tokens=prompt_ids + reply_ids,
        metadata={"prompt_length": len(prompt_ids)},
        full_text=tok.decode(prompt_ids + reply_ids, skip_special_tokens=False),
    )
    more = template.continuation(reply_ids, "again")
    more_tokens = len(tok.encode(more, add_special_tokens=False))
    fits = len(node.tokens) + more_tokens + 1  # room for exactly one reply token
    turn = NextTurn.after(node, template, "again", fits)
    assert turn is not None and turn.room == 1
    assert turn.prompt == node.full_text + more and "again" in turn.prompt
    assert NextTurn.after(node, template, "again", fits - 1) is None  # not one token of room

    asked: list[dict[str, Any]] = []

    class Managed:
        async def completion(self, **kwargs: Any) -> Any:
            asked.append(kwargs)
            return SimpleNamespace(choices=[SimpleNamespace(text="ok")])

    roomy = NextTurn.after(node, template, "again", fits + 99)
    assert roomy is not None
    assert asyncio.run(roomy.sample(Managed(), 256, 0.7)) == "ok"
    assert asyncio.run(turn.sample(Managed(), 256, 0.7)) == "ok"
    assert [a["max_tokens"] for a in asked] == [100, 1]  # the room caps max_tokens_per_turn
    assert asked[0] == {"prompt": roomy.prompt, "n": 1, "max_tokens": 100, "temperature": 0.7}

"""The set-up checks the OpenEnv and verifiers envs share: exact token ids from the inference server,
and a chat template that renders a multi-turn episode verbatim."""

from __future__ import annotations

import pytest

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.interop.openenv.episode import TurnTemplate, require_exact_tokens
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

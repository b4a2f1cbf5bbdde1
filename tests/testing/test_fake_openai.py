"""The fake OpenAI-compatible server's app shape (``atroposlib.testing.fake_openai``): its old module
path re-exports it, the routes it serves, the scripted model's generation rule and which refusal
answers first (its answers over HTTP are what the env, runtime and client tests run against)."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

import atroposlib.testing as testing
import atroposlib.testing.fake_server as old_path
from atroposlib.testing.fake_openai import logprobs, scripted_model, server
from atroposlib.testing.fake_openai.app import create_app
from atroposlib.testing.fake_openai.refusals import refusal
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


def test_the_old_module_path_reexports_the_package():
    assert old_path.FakeOpenAIServer is testing.FakeOpenAIServer is server.FakeOpenAIServer
    assert old_path.Responder is scripted_model.Responder
    assert old_path.fake_logprob is logprobs.fake_logprob
    assert old_path.fake_prompt_candidates is logprobs.fake_prompt_candidates
    assert old_path.fake_prompt_logprobs is logprobs.fake_prompt_logprobs


def test_the_fake_serves_its_routes(tok):
    paths = create_app(ScriptedModel(tok)).openapi()["paths"]
    served = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    assert served == {
        ("GET", "/health"),
        ("GET", "/weight_info"),
        ("POST", "/update_weight_version"),
        ("GET", "/v1/models"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/generate"),
    }


def test_a_generation_is_cut_at_max_tokens_or_ends_with_eos(tok):
    seen: list[int] = []

    def responder(prompt_text: str, body: dict) -> str:
        seen.append(body["choice_index"])
        return "two words"

    model = ScriptedModel(tok, responder=responder)
    ids = list(tok.encode("two words", add_special_tokens=False))
    whole = model.generate("p", {}, 0)
    assert whole.ids == [*ids, tok.eos_token_id] and whole.finish == "stop"
    assert whole.text == "two words"
    cut = model.generate("p", {"max_completion_tokens": 2}, 3)
    assert cut.ids == ids[:2] and cut.finish == "length"
    assert seen == [0, 3] and model.in_flight == 0 and model.max_in_flight == 1


def test_an_unknown_model_is_refused_before_a_scripted_failure_is_spent(tok):
    model = ScriptedModel(tok, model="m", strict_model=True)
    model.fail_next(1, status=429)
    wrong = refusal(model, {"model": "other"})
    assert wrong is not None and wrong.status_code == 404
    assert json.loads(bytes(wrong.body))["error"]["message"] == "The model `other` does not exist."
    assert refusal(model, {"model": "m"}).status_code == 429  # type: ignore[union-attr]
    assert refusal(model, {"model": "m"}) is None
    model.fail_next(1, status=503)
    assert refusal(model, None).status_code == 503  # type: ignore[union-attr]  # no model check

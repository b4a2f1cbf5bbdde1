"""Agent frameworks' clients against a real proxy over the real vLLM CPU build: the ``openai`` client
(sync, async, streaming, ``n=2`` with a seed, no ``max_tokens``: the rest of vLLM's context),
langchain-openai (plain and streaming) and litellm (streaming), each the real package in its own
environment, one subprocess per framework (``tests/interop/agents/drivers``). On the tier's tiny random
model replies are arbitrary token ids; every session's nodes must hold exactly what its client was
sent, each reply trained once, everything else masked, and vLLM's own prompt and generated ids
(``proxy_harness.check_session``). Uses the tier's shared plain server (``dev_vllm``)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from atroposlib.inference_clients.proxy.serve import backend_model
from tests.inference_clients.proxy_harness import check_session, running_proxy
from tests.interop.agents.conformance import run_driver

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def vllm_proxy(dev_vllm, tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    url = dev_vllm["plain"].url + "/v1"
    model = backend_model(url, None, None, wait_s=60)  # its name, and its context length (512)
    assert model.max_model_len == 512
    with running_proxy(url, tok, model.name, max_model_len=model.max_model_len) as proxy:
        yield proxy, tok, model.name


def test_openai_client_against_vllm(vllm_proxy, tmp_path):
    proxy, tok, model = vllm_proxy
    checks = ["vllm_greedy", "vllm_budget", "vllm_sampling", "vllm_async"]
    report, sessions = run_driver(
        proxy, "openai", "openai_driver.py", checks, tmp_path, model=model
    )
    greedy = report["vllm_greedy"]
    assert greedy["stream"] == greedy["json"] and greedy["pieces"] > 3  # the stream adds up
    budget = report["vllm_budget"]  # no max_tokens: the rest of the 512-token context
    assert 0 < budget["completion_tokens"] <= 512 - budget["prompt_tokens"]
    assert (
        budget["finish_reason"] == "stop"
        or budget["completion_tokens"] == 512 - budget["prompt_tokens"]
    )
    sampling = report["vllm_sampling"]
    assert sampling["first"] == sampling["second"] and len(sampling["first"]) == 2  # seeded
    assert sampling["completion_tokens"] > 0 and report["vllm_async"]["completion_tokens"] > 0
    for session in sessions.values():
        check_session(proxy, session, tok)


def test_langchain_and_litellm_against_vllm(vllm_proxy, tmp_path):
    proxy, tok, model = vllm_proxy
    lc, lc_sessions = run_driver(
        proxy, "langchain-openai", "langchain_driver.py", ["vllm_plain"], tmp_path, model=model
    )
    assert lc["vllm_plain"]["invoke"] > 0 and lc["vllm_plain"]["stream"] > 0
    lite, lite_sessions = run_driver(
        proxy, "mini-swe-agent", "litellm_driver.py", ["vllm_stream"], tmp_path, model=model
    )
    assert lite["vllm_stream"]["chunks"] > 3 and lite["vllm_stream"]["completion_tokens"] > 0
    for session in [*lc_sessions.values(), *lite_sessions.values()]:
        check_session(proxy, session, tok)
    assert proxy.state.summary_counts()["backend_errors"] == 0

"""Fixtures of the agent-framework conformance suite: one fake model scripted per task (for the
tool-call paths a tiny random model cannot take) behind one real proxy, shared by the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from transformers import AutoTokenizer

from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from tests.inference_clients.proxy_harness import RunningProxy, running_proxy
from tests.interop.agents.conformance import scripted_reply


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))


@pytest.fixture(scope="module")
def scripted_proxy(tok) -> Iterator[RunningProxy]:
    with FakeOpenAIServer(tokenizer=tok, responder=scripted_reply, model="policy") as fake:
        with running_proxy(fake.base_url, tok) as proxy:
            yield proxy

"""Fixtures of the inference-client tests: a tiny local tokenizer and a fake inference server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir

ANSWERS = ["The answer is 7.", "I think 3", "It is 12", "no idea"]


def answer_responder(prompt_text: str, body: dict) -> str:
    """Different answers per choice."""
    return ANSWERS[body.get("choice_index", 0) % len(ANSWERS)]


@pytest.fixture(scope="session")
def tok_dir() -> Path:
    return tiny_tokenizer_dir()


@pytest.fixture
def fake_server(tok_dir: Path) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(tokenizer=tok_dir, responder=answer_responder) as fake:
        yield fake

"""The fake OpenAI-compatible server's old module path; it lives in ``atroposlib.testing.fake_openai``."""

from atroposlib.testing.fake_openai.logprobs import (
    fake_logprob,
    fake_prompt_candidates,
    fake_prompt_logprobs,
)
from atroposlib.testing.fake_openai.scripted_model import Responder
from atroposlib.testing.fake_openai.server import FakeOpenAIServer

__all__ = [
    "FakeOpenAIServer",
    "Responder",
    "fake_logprob",
    "fake_prompt_candidates",
    "fake_prompt_logprobs",
]

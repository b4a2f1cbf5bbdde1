"""A small but real OpenAI-compatible HTTP server for tests: scripted text, real token ids, logprobs.

    with FakeOpenAIServer(tokenizer=tok_dir, responses=["The answer is 4."]) as fake:
        APIServerConfig(base_url=fake.base_url, server_type="vllm", ...)

It serves ``/v1/completions`` (prompt text or token-id list), ``/v1/chat/completions`` (rendered with
the tokenizer's chat template), ``/v1/models`` and ``/health`` on a free loopback port (uvicorn in a
thread). Completion text comes from ``responses`` (cycled) or ``responder(prompt_text, body) -> str``;
it is tokenized with the given tokenizer, cut at ``max_tokens`` (``finish_reason="length"``) or ended
with the EOS token (``"stop"``). vLLM-flavour extras: ``return_token_ids`` adds ``token_ids`` and
``prompt_token_ids`` to every choice; ``logprobs`` returns deterministic per-token logprobs in the
OpenAI shapes; ``prompt_logprobs=k`` on ``/v1/completions`` adds vLLM's per-prompt-token rows (None
for the first token, then the k candidates ``fake_prompt_candidates`` gives, plus the prompt token
itself when it is not among them). ``fail_next(n, status)`` makes the next n generation requests fail; ``requests``
records every generation body; ``max_in_flight`` is the most generations seen running at once.
``strict_model=True`` answers a request for another model than ``model`` with vLLM's 404
(``The model `x` does not exist.``), as a real server does.

Weights versions, as vLLM's dev mode has them: with ``weights_version`` set (a label string) the
server answers ``GET /weight_info`` and ``POST /update_weight_version`` (without: 404, as vLLM
outside dev mode); its completions carry no version (vLLM's OpenAI routes do not), its SGLang
``/generate`` answers ``meta_info.weight_version``. ``logprob_gaps=True`` answers ``null`` for the
first generated token's logprob (a server that leaves a token without one).

What it answers with is its ``ScriptedModel`` part (``scripted_model.py``); the routes are in
``routes/``, put together by ``app.py``; this class adds the port and the thread that serves them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.testing.fake_openai.app import create_app
from atroposlib.testing.fake_openai.scripted_model import Responder, ScriptedModel
from atroposlib.utils.net import free_port, wait_for_http

if TYPE_CHECKING:
    import uvicorn


class FakeOpenAIServer(ScriptedModel):
    def __init__(
        self,
        tokenizer: Any = None,
        responses: Optional[Sequence[str]] = None,
        responder: Optional[Responder] = None,
        model: str = "fake-model",
        port: Optional[int] = None,
        strict_model: bool = False,
        weights_version: Optional[str] = None,
        logprob_gaps: bool = False,
    ) -> None:
        super().__init__(
            tokenizer,
            responses,
            responder,
            model,
            strict_model=strict_model,
            weights_version=weights_version,
            logprob_gaps=logprob_gaps,
        )
        self.port = port or free_port()
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 30.0) -> FakeOpenAIServer:
        import uvicorn

        config = uvicorn.Config(
            create_app(self), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, name=f"fake-openai-{self.port}", daemon=True
        )
        self._thread.start()
        wait_for_http(f"http://127.0.0.1:{self.port}/health", timeout=timeout)
        return self

    def stop(self) -> None:
        """Shut the server down (connections are closed; clients see it die)."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server, self._thread = None, None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


__all__ = ["FakeOpenAIServer"]

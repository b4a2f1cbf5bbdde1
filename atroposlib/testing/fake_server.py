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
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from atroposlib.utils.net import free_port, wait_for_http
from atroposlib.utils.openai_shapes import openai_choice, openai_response, token_usage

if TYPE_CHECKING:
    import uvicorn

Responder = Callable[[str, dict[str, Any]], str]


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic logprob in [-3, -0.01) for a token at a position."""
    h = hashlib.sha256(f"{token_id}:{position}".encode()).digest()
    return -0.01 - 2.99 * (int.from_bytes(h[:4], "big") / 2**32)


class _Refused(Exception):
    """Raised by a route to answer ``response`` (an error) instead."""

    def __init__(self, response: JSONResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def fake_prompt_candidates(prompt_ids: Sequence[int], position: int, k: int) -> list[int]:
    """The k token ids the fake server ranks first at ``position`` of a prompt: the prompt's own
    token, then the ids after it (a deterministic stand-in for a teacher's top-k)."""
    return [prompt_ids[position] + j for j in range(max(1, k))]


def fake_prompt_logprobs(prompt_ids: Sequence[int], k: int) -> list[Optional[dict[str, Any]]]:
    """vLLM's ``prompt_logprobs`` rows for a prompt (see ``fake_prompt_candidates``)."""
    rows: list[Optional[dict[str, Any]]] = [None]
    for p in range(1, len(prompt_ids)):
        ids = fake_prompt_candidates(prompt_ids, p, k)
        lps = sorted((fake_logprob(t, p) for t in ids), reverse=True)
        rows.append(
            {
                str(t): {"logprob": lp, "rank": r + 1}
                for r, (t, lp) in enumerate(zip(ids, lps, strict=True))
            }
        )
    return rows


class FakeOpenAIServer:
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
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer or tiny_tokenizer_dir()))
        self.tokenizer = tokenizer
        self._cycle = itertools.cycle(
            list(responses) if responses else ["This is a fake completion."]
        )
        self.responder = responder
        self.model = model
        self.strict_model = strict_model
        self.weights_version = weights_version
        self.logprob_gaps = logprob_gaps
        self.port = port or free_port()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- control -----------------------------------------------------------------------------
    def fail_next(self, n: int = 1, status: int = 503) -> None:
        with self._lock:
            self._failures.extend([status] * n)

    def start(self, timeout: float = 30.0) -> FakeOpenAIServer:
        import uvicorn

        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
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

    # --- generation --------------------------------------------------------------------------
    def _text_for(self, prompt_text: str, body: dict[str, Any]) -> str:
        if self.responder is not None:
            return str(self.responder(prompt_text, body))
        with self._lock:
            return next(self._cycle)

    def _generate(self, prompt_text: str, body: dict[str, Any], index: int) -> dict[str, Any]:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            text = self._text_for(prompt_text, {**body, "choice_index": index})
        finally:
            with self._lock:
                self.in_flight -= 1
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        finish = "stop"
        if max_tokens is not None and len(ids) >= int(max_tokens):
            ids, finish = ids[: int(max_tokens)], "length"
        elif self.tokenizer.eos_token_id is not None:
            ids = ids + [self.tokenizer.eos_token_id]
        shown = self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return {"ids": ids, "text": shown, "finish": finish}

    def _app(self):
        app = FastAPI()

        @app.get("/health")
        def health() -> dict[str, Any]:
            return {"status": "ok", "weights_version": 0, "model_path": self.model}

        @app.get("/weight_info")
        def weight_info() -> Any:
            if self.weights_version is None:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            return {"weight_version": self.weights_version}

        @app.post("/update_weight_version")
        async def update_weight_version(request: Request) -> Any:
            if self.weights_version is None:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            self.weights_version = str((await request.json())["new_version"])
            return {"success": True, "new_version": self.weights_version}

        @app.get("/v1/models")
        def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model"}]}

        def failure(body: Optional[dict[str, Any]] = None) -> Optional[JSONResponse]:
            asked = (body or {}).get("model")
            if self.strict_model and body is not None and asked != self.model:
                error = {
                    "message": f"The model `{asked}` does not exist.",
                    "type": "NotFoundError",
                    "param": "model",
                    "code": 404,
                }
                return JSONResponse({"error": error}, status_code=404)
            with self._lock:
                status = self._failures.pop(0) if self._failures else None
            if status is None:
                return None
            return JSONResponse(
                {"error": {"message": f"scripted failure {status}"}}, status_code=status
            )

        @app.exception_handler(_Refused)
        async def refused(request: Request, exc: _Refused) -> JSONResponse:
            return exc.response

        async def received(request: Request, check_model: bool = True) -> dict[str, Any]:
            """The request's body, recorded in ``self.requests``; raises ``_Refused`` with the answer
            to give instead (an unknown model, a scripted failure)."""
            body = await request.json()
            self.requests.append(body)
            if (response := failure(body if check_model else None)) is not None:
                raise _Refused(response)
            return body

        @app.post("/v1/completions")
        async def completions(request: Request):
            body = await received(request)
            prompt = body.get("prompt")
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
                prompt = prompt[0]
            if isinstance(prompt, list):
                prompt_ids = [int(t) for t in prompt]
                prompt_text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
            elif isinstance(prompt, str):
                prompt_text, prompt_ids = (
                    prompt,
                    list(self.tokenizer.encode(prompt, add_special_tokens=True)),
                )
            else:
                return JSONResponse(
                    {"error": {"message": "prompt must be a string or a list of token ids"}}, 400
                )
            choices = []
            for i in range(int(body.get("n") or 1)):
                g = await run_in_threadpool(self._generate, prompt_text, body, i)
                ch = openai_choice("text_completion", i, g["text"], g["finish"])
                if body.get("logprobs") not in (None, False):
                    toks = [self.tokenizer.decode([t], skip_special_tokens=False) for t in g["ids"]]
                    lps: list[Optional[float]] = [
                        fake_logprob(t, len(prompt_ids) + j) for j, t in enumerate(g["ids"])
                    ]
                    if self.logprob_gaps and lps:
                        lps[0] = None
                    ch["logprobs"] = {
                        "tokens": toks,
                        "token_logprobs": lps,
                        "top_logprobs": [{tk: lp} for tk, lp in zip(toks, lps, strict=True)],
                        "text_offset": list(
                            itertools.accumulate([0] + [len(t) for t in toks[:-1]])
                        ),
                    }
                if body.get("return_token_ids"):
                    ch["token_ids"], ch["prompt_token_ids"] = g["ids"], prompt_ids
                if body.get("prompt_logprobs") is not None:
                    ch["prompt_logprobs"] = fake_prompt_logprobs(
                        prompt_ids, int(body["prompt_logprobs"])
                    )
                    ch["prompt_token_ids"] = prompt_ids
                choices.append(ch)
            n_out = sum(len(c.get("token_ids") or []) for c in choices)
            usage = token_usage(len(prompt_ids), n_out)
            return openai_response("text_completion", self.model, choices, usage)

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await received(request)
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return JSONResponse(
                    {"error": {"message": "messages must be a non-empty list"}}, 400
                )
            prompt_text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            prompt_ids = list(self.tokenizer.encode(prompt_text, add_special_tokens=False))
            choices = []
            for i in range(int(body.get("n") or 1)):
                g = await run_in_threadpool(self._generate, prompt_text, body, i)
                ch = openai_choice("chat.completion", i, g["text"], g["finish"])
                if body.get("logprobs"):
                    ch["logprobs"] = {
                        "content": [
                            {
                                "token": self.tokenizer.decode([t], skip_special_tokens=False),
                                "bytes": None,
                                "logprob": fake_logprob(t, len(prompt_ids) + j),
                                "top_logprobs": [],
                            }
                            for j, t in enumerate(g["ids"])
                        ]
                    }
                if body.get("return_token_ids"):
                    ch["token_ids"], ch["prompt_token_ids"] = g["ids"], prompt_ids
                choices.append(ch)
            return openai_response("chat.completion", self.model, choices)

        @app.post("/generate")
        async def sglang_generate(request: Request):
            """SGLang's native route: ``input_ids`` (or ``text``), ``sampling_params``, ``return_logprob``."""
            body = await received(request, check_model=False)
            batch: Any = body.get("input_ids", body.get("text"))
            single = not (isinstance(batch, list) and batch and isinstance(batch[0], (list, str)))
            prompts = [batch] if single else batch
            params = dict(body.get("sampling_params") or {})
            gen_body = {"max_tokens": params.get("max_new_tokens")}
            results = []
            for i, p in enumerate(prompts):
                ids = [int(t) for t in p] if isinstance(p, list) else list(self.tokenizer.encode(p))
                text = self.tokenizer.decode(ids, skip_special_tokens=False)
                g = await run_in_threadpool(self._generate, text, gen_body, i)
                meta: dict[str, Any] = {
                    "prompt_tokens": len(ids),
                    "completion_tokens": len(g["ids"]),
                    "finish_reason": {"type": g["finish"]},
                }
                if body.get("return_logprob"):
                    meta["output_token_logprobs"] = [
                        [fake_logprob(t, len(ids) + j), t, None] for j, t in enumerate(g["ids"])
                    ]
                    if self.logprob_gaps and g["ids"]:
                        meta["output_token_logprobs"][0][0] = None
                if self.weights_version is not None:
                    meta["weight_version"] = self.weights_version
                results.append({"text": g["text"], "output_ids": g["ids"], "meta_info": meta})
            return results[0] if single else results

        return app


__all__ = [
    "FakeOpenAIServer",
    "Responder",
    "fake_logprob",
    "fake_prompt_candidates",
    "fake_prompt_logprobs",
]

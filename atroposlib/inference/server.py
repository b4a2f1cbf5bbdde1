"""FastAPI app of the CPU inference engine: OpenAI-compatible completions/chat, health, metrics, reload.

``create_app(config)`` loads the model (``ModelLoadError`` for a bad directory), starts the generation
worker on startup and stops it on shutdown. Errors are OpenAI-shaped: ``{"error": {"message", "type",
"param", "code"}}`` with 400 for bad parameters, 503 when the queue is full. ``stream: true`` answers with
server-sent events shaped as vLLM's (see ``streaming``); a client that goes away mid-stream has its rows
taken out of the batch.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST

from atroposlib.errors import InferenceUnavailable, ModelLoadError
from atroposlib.inference.config import EngineConfig
from atroposlib.inference.engine import InferenceEngine
from atroposlib.inference.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    LoadLoraRequest,
    UnloadLoraRequest,
    UpdateWeightsRequest,
    UpdateWeightVersionRequest,
    chat_response,
    completion_response,
)
from atroposlib.inference.sampling import RowParams
from atroposlib.inference.streaming import ChunkStream, Kind, RowFollower, StreamSpec, sse_events

log = logging.getLogger(__name__)


class BadRequest(Exception):
    """A request the engine refuses; becomes an OpenAI-shaped 4xx."""

    def __init__(self, message: str, param: Optional[str] = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


def _error(
    status: int, message: str, param: Optional[str] = None, kind: str = "BadRequestError"
) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": kind, "param": param, "code": status}},
    )


def _check_unsupported(req: Any) -> None:
    if req.stream_options is not None and not req.stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.", "stream_options")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name):
            raise BadRequest(f"{name} is not supported (only 0)", name)
    if getattr(req, "echo", False):
        raise BadRequest("echo=true is not supported", "echo")


def _prompt_list(prompt: Any, vocab: int) -> list[list[int]] | list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise BadRequest("prompt must not be empty", "prompt")
    if all(isinstance(x, int) for x in prompt):
        prompts: list[Any] = [list(prompt)]
    else:
        prompts = list(prompt)
    for p in prompts:
        if isinstance(p, list):
            if not p:
                raise BadRequest("a token-id prompt must not be empty", "prompt")
            bad = [t for t in p if not 0 <= t < vocab]
            if bad:
                raise BadRequest(
                    f"token id {bad[0]} is outside the vocabulary (0..{vocab - 1})", "prompt"
                )
    return prompts


def create_app(config: EngineConfig, engine: Optional[InferenceEngine] = None) -> FastAPI:
    """Build the app; loads the model now (raises ``ModelLoadError``) unless ``engine`` is given."""
    eng = engine or InferenceEngine(config)
    name = config.served_model_name or eng.model_path.name
    tok = eng.tokenizer
    vocab = int(eng.loaded.model.get_input_embeddings().weight.shape[0])
    text_cache: dict[int, str] = {}

    def token_text(tid: int) -> str:
        s = text_cache.get(tid)
        if s is None:
            s = text_cache[tid] = tok.decode([tid], skip_special_tokens=False)
        return s

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        eng.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, eng.stop)

    app = FastAPI(title="atroposlib CPU inference engine", lifespan=lifespan)
    app.state.engine = eng

    @app.middleware("http")
    async def count_requests(request: Request, call_next):
        response = await call_next(request)
        path = request.url.path
        if path.startswith("/v1/") and request.method == "POST":
            eng.metrics.requests.labels(path, str(response.status_code)).inc()
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        loc = [str(p) for p in first.get("loc", []) if p != "body"]
        param = ".".join(loc) or None
        return _error(400, f"invalid parameter {param}: {first.get('msg', 'invalid')}", param)

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        msg = exc.message
        if exc.param and exc.param not in msg:
            msg = f"{exc.param}: {msg}"
        kind = "NotFoundError" if exc.status == 404 else "BadRequestError"
        return _error(exc.status, msg, exc.param, kind)

    @app.exception_handler(InferenceUnavailable)
    async def _busy(_: Request, exc: InferenceUnavailable) -> JSONResponse:
        return _error(503, str(exc), None, "ServiceUnavailableError")

    def token_id_text(tid: int) -> str:
        return f"token_id:{tid}"

    base_names = {name, config.model_path}

    def check_model(model: Optional[str]) -> None:
        """vLLM's rule: no name = the served model; a served name or a loaded adapter; else 404."""
        if not model or model in base_names or model in eng.adapters:
            return
        raise BadRequest(
            f"The model `{model}` does not exist. Valid aliases: {name}.", "model", status=404
        )

    def rows_for(ids: list[int], req: Any, max_tokens: Optional[int], top: int) -> list[RowParams]:
        if not ids:
            raise BadRequest("prompt is empty after tokenization", "prompt")
        if len(ids) >= eng.max_model_len:
            raise BadRequest(
                f"prompt is {len(ids)} tokens; this model's maximum context length is {eng.max_model_len}",
                "prompt",
            )
        budget = eng.max_model_len - len(ids)
        mt = min(max_tokens, budget) if max_tokens is not None else budget
        if req.n > config.max_n:
            raise BadRequest(f"n={req.n} exceeds the server's max_n={config.max_n}", "n")
        return [
            RowParams(
                prompt_ids=ids,
                max_tokens=mt,
                temperature=req.temperature,
                top_p=req.top_p,
                top_k=max(req.top_k, 0),
                stop=req.stop or [],
                seed=None if req.seed is None else req.seed + j,
                top_logprobs=top,
                ignore_eos=req.ignore_eos,
                prompt_logprobs=getattr(req, "prompt_logprobs", None),
                adapter=req.model if req.model in eng.adapters else None,
            )
            for j in range(req.n)
        ]

    async def run(rows: list[RowParams]) -> list:
        return await asyncio.wrap_future(eng.submit(rows))

    def stream(
        kind: Kind,
        req: Any,
        prompts: list[list[int]],
        rows: list[RowParams],
        logprobs: Optional[int],
    ) -> StreamingResponse:
        """Queue ``rows`` (a full queue is still a 503) and answer with their SSE stream."""
        follower = RowFollower(asyncio.get_running_loop(), len(rows))
        job = eng.submit_job(rows, on_progress=follower)
        finished = asyncio.wrap_future(job.future)
        finished.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen, not logged
        opts = req.stream_options
        spec = StreamSpec(
            kind=kind,
            model=name,
            prompts=prompts,
            n=req.n,
            decode=eng.loaded.decode,
            token_text=token_id_text if req.return_tokens_as_token_ids else token_text,
            stop=req.stop or [],
            logprobs=logprobs,
            return_token_ids=req.return_token_ids,
            include_usage=bool(opts and opts.include_usage),
            continuous_usage=bool(opts and opts.include_usage and opts.continuous_usage_stats),
        )
        events = sse_events(ChunkStream(spec), follower, finished, job.abort)
        return StreamingResponse(events, media_type="text/event-stream")

    @app.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest) -> JSONResponse | StreamingResponse:
        check_model(req.model)
        _check_unsupported(req)
        prompts = _prompt_list(req.prompt, vocab)
        ids_list = [
            p if isinstance(p, list) else tok(p, add_special_tokens=True)["input_ids"]
            for p in prompts
        ]
        max_tokens = req.max_tokens if req.max_tokens is not None else config.default_max_tokens
        top = req.logprobs or 0
        rows = [r for ids in ids_list for r in rows_for(ids, req, max_tokens, top)]
        if req.stream:
            return stream("completion", req, ids_list, rows, req.logprobs)
        results = await run(rows)
        render = token_id_text if req.return_tokens_as_token_ids else token_text
        return JSONResponse(
            completion_response(
                name, ids_list, req.n, results, render, req.logprobs, req.return_token_ids
            )
        )

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        check_model(req.model)
        _check_unsupported(req)
        if getattr(tok, "chat_template", None) is None:
            raise BadRequest(
                "the served tokenizer has no chat template; use /v1/completions", "messages"
            )
        messages = []
        for m in req.messages:
            content = m.content
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            messages.append({"role": m.role, "content": content or ""})
        try:
            text = tok.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=req.add_generation_prompt
            )
        except Exception as e:
            raise BadRequest(f"chat template failed on these messages: {e}", "messages") from e
        ids = tok(text, add_special_tokens=False)["input_ids"]
        max_tokens = req.max_completion_tokens or req.max_tokens
        top = (req.top_logprobs or 0) if req.logprobs else 0
        if req.top_logprobs and not req.logprobs:
            raise BadRequest("top_logprobs requires logprobs=true", "top_logprobs")
        rows = rows_for(ids, req, max_tokens, top)
        if req.stream:
            return stream("chat", req, [ids], rows, top if req.logprobs else None)
        results = await run(rows)
        render = token_id_text if req.return_tokens_as_token_ids else token_text
        return JSONResponse(
            chat_response(name, ids, results, render, req.logprobs, top, req.return_token_ids)
        )

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "atroposlib",
                "root": str(eng.model_path),
                "parent": None,
                "max_model_len": eng.max_model_len,
            }
        ]
        for lora, path in list(eng.adapters.items()):
            data.append(
                {
                    "id": lora,
                    "object": "model",
                    "created": 0,
                    "owned_by": "atroposlib",
                    "root": str(path),
                    "parent": name,
                    "max_model_len": eng.max_model_len,
                }
            )
        return {"object": "list", "data": data}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": name,
            "model_path": str(eng.model_path),
            "weights_version": eng.weights_version,
            "queue_depth": eng.queue_depth(),
            "max_model_len": eng.max_model_len,
            "device": str(next(eng.loaded.model.parameters()).device),
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        eng.metrics.queue_depth.set(eng.queue_depth())
        return Response(eng.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/update_weights_from_disk")
    async def update_weights(req: UpdateWeightsRequest) -> JSONResponse:
        loop = asyncio.get_running_loop()
        label = int(req.weight_version) if req.weight_version is not None else None
        try:
            version = await loop.run_in_executor(None, eng.reload_weights, req.model_path, label)
        except ModelLoadError as e:
            return JSONResponse(
                status_code=400,
                content={
                    "success": False,
                    "message": str(e),
                    "weights_version": eng.weights_version,
                },
            )
        return JSONResponse(
            {
                "success": True,
                "message": f"loaded weights from {req.model_path}",
                "weights_version": version,
            }
        )

    @app.get("/weight_info")
    async def weight_info() -> dict[str, Any]:
        """vLLM's dev-mode route: the label of the weights being served."""
        return {"weight_version": str(eng.weights_version)}

    @app.post("/update_weight_version")
    async def update_weight_version(req: UpdateWeightVersionRequest) -> dict[str, Any]:
        """vLLM's dev-mode route: label the weights being served (after a LoRA load, say)."""
        eng.set_weights_version(int(req.new_version))
        return {"success": True, "new_version": req.new_version}

    @app.post("/v1/load_lora_adapter")
    async def load_lora(req: LoadLoraRequest) -> Response:
        if req.lora_name in base_names:
            raise BadRequest(
                f"The lora adapter '{req.lora_name}' conflicts with a served base model.",
                "lora_name",
            )
        if req.lora_name in eng.adapters and not req.load_inplace:
            raise BadRequest(
                f"The lora adapter '{req.lora_name}' has already been loaded. If you want to load "
                "the adapter in place, set 'load_inplace' to True.",
                "lora_name",
            )
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, eng.load_lora, req.lora_name, req.lora_path)
        except ModelLoadError as e:
            raise BadRequest(str(e), "lora_path") from e
        return Response(
            f"Success: LoRA adapter '{req.lora_name}' added successfully.", media_type="text/plain"
        )

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(req: UnloadLoraRequest) -> Response:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, eng.unload_lora, req.lora_name)
        except ModelLoadError as e:
            raise BadRequest(
                f"The lora adapter '{req.lora_name}' cannot be found.", "lora_name", status=404
            ) from e
        return Response(
            f"Success: LoRA adapter '{req.lora_name}' removed successfully.",
            media_type="text/plain",
        )

    return app


__all__ = ["BadRequest", "create_app"]

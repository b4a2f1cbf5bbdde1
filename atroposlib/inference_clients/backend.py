"""The backend interface: ``APIServer``, which every inference backend (``backends/``) subclasses.

Every backend offers ``chat_completion(**kw)`` and ``completion(**kw)`` (OpenAI objects back), and the
token-level ``tokens_and_logprobs_completion(prompt=str|ids, n=..., ...)`` that returns
``(prompt_tokens, output_tokens, output_logprobs, finish_reasons)`` where the backend exposes tokens.
The base class owns what all share: a weighted concurrency limit (``num_max_requests_at_once``,
scaled by the env's weight), retries with exponential backoff, request timing buffers and a cheap
health poll (``/health``, else ``/v1/models``; never a completion).

Every attempt has a timeout that follows what it asks for (``request_timeout``):
``timeout_base + max_tokens / min_tokens_per_second`` seconds, at most ``timeout``; an attempt
without an answer by then fails like a refused connection (``ServerDown``) and is retried.
A server that has never shown it works (``alive_seen``: no answer to a request or a health probe
yet) is given ``silence_limit`` seconds (the manager's unreachable timeout); then one more health
probe decides: no answer to it either and the attempt fails with ``ServerSilent`` (not retried: the
server accepts connections and answers nothing, a wedged server or a stuck load balancer). A server
that answers its probes is only slow, and its request runs on until its own timeout.

Every answer is tagged with the weights version that generated it, as the server reports it
(``weights_version``): stamped in the answer where the server does that, else bracketed by reads of
the server's current version (``_read_weights_version``, shared by concurrent requests); the
token-level call returns a ``TokenResult`` (still four values) whose ``versions`` has one span per
output, and every answer's spans are noted in the current item's ``GenerationLog``.

A backend's class also names the routes the trainer uses to put new weights into a running server
of its kind (``weight_routes``; see the ``weight_routes`` module); ``None`` where it has none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, ClassVar, Optional

import httpx
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceError, ServerDown, ServerSilent, ServerSlow
from atroposlib.inference_clients.answers import rejected
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.generation_log import note_versions
from atroposlib.inference_clients.limits import WeightedSemaphore
from atroposlib.inference_clients.logprobs import PromptLogprobsMixin
from atroposlib.inference_clients.weight_routes import WeightRoutes
from atroposlib.inference_clients.weights_version import (
    Span,
    TokenResult,
    VersionProbe,
    merge,
    parse_version,
    result_versions,
    span_from_stamps,
)

logger = logging.getLogger(__name__)

TokensAndLogprobs = tuple[list[int], list[list[int]], list[list[float]], list[str]]
VERSION_READ_MAX_AGE = 1.0
"""Seconds a read of a server's weights version serves as the lower bound of the requests sent
after it; older, a request waits for a fresh read first (one per second at most, shared)."""


def api_root(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p``."""
    url = (base_url or "").rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class APIServer(PromptLogprobsMixin):
    """One inference server: limits, retries, health, timings. Subclasses implement ``_request_*``."""

    supports_tokens: ClassVar[bool] = False
    weight_routes: ClassVar[Optional[WeightRoutes]] = None

    def __init__(self, config: APIServerConfig, **_: Any) -> None:
        self.config = config
        self.sem = WeightedSemaphore(config.num_max_requests_at_once)
        self.eval_sem = WeightedSemaphore(config.num_requests_for_eval)
        self.server_healthy = True
        self.request_timings: deque = deque(maxlen=config.rolling_buffer_length)
        self.eval_request_timings: deque = deque(maxlen=config.rolling_buffer_length)
        self.attempts_list: deque = deque(maxlen=config.rolling_buffer_length)
        self.eval_attempts_list: deque = deque(maxlen=config.rolling_buffer_length)
        self.failures = 0
        # requests that got an answer (a server that never answered may be misnamed), the model
        # name its answers carry, and the max_tokens / temperature / n of eval requests (for
        # metrics.json)
        self.answered = 0
        self.alive_seen = False
        self.silence_limit: Optional[float] = None
        self._probe_task: Optional[asyncio.Task[bool]] = None
        self.served_model: Optional[str] = None
        self.eval_max_tokens: set[int] = set()
        self.eval_sampling: set[tuple[Optional[float], int]] = set()  # (temperature, n) asked
        self.check_task: Optional[asyncio.Task] = None
        self._http: Optional[httpx.AsyncClient] = None
        self.reasoning: dict[
            str, Any
        ] = {}  # thinking_mode / reasoning_effort, set from the env config
        self.versions = VersionProbe(self._read_weights_version)

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = (
                {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
            )
            self._http = httpx.AsyncClient(timeout=self.config.timeout, headers=headers)
        return self._http

    def _should_health_check(self) -> bool:
        return bool(
            self.config.health_check
            and self.config.base_url
            and "api.openai.com" not in self.config.base_url
        )

    def _ensure_health_task(self) -> None:
        if self.check_task is None and self._should_health_check():
            self.check_task = asyncio.get_running_loop().create_task(
                self.check_server_status_task()
            )

    async def probe(self) -> bool:
        """One cheap health probe: ``GET /health``, else ``GET /v1/models``."""
        root = api_root(self.config.base_url or "")
        for url in (f"{root}/health", f"{(self.config.base_url or '').rstrip('/')}/models"):
            try:
                r = await self.http.get(url, timeout=5.0)
            except httpx.HTTPError:
                return False
            if r.status_code < 400:
                self.alive_seen = True
                return True
            if r.status_code != 404:
                return False
        return False

    async def shared_probe(self) -> bool:
        """One ``probe``, shared by the requests that ask at the same time."""
        if self._probe_task is None or self._probe_task.done():
            self._probe_task = asyncio.ensure_future(self.probe())
        try:
            return await asyncio.shield(self._probe_task)
        except Exception:  # noqa: BLE001 - a probe that fails is no answer
            return False

    async def check_server_status_task(self) -> None:
        """Poll health; a server is marked down after 3 failed probes in a row (a busy server whose
        probe times out once is not taken out of rotation), and up again after one good probe."""
        misses = 0
        while True:
            ok = await self.probe()
            misses = 0 if ok else misses + 1
            healthy = ok or (self.server_healthy and misses < 3)
            if healthy != self.server_healthy:
                logger.warning(
                    "inference server %s is %s",
                    self.config.base_url,
                    "healthy again" if healthy else "DOWN",
                )
            self.server_healthy = healthy
            await asyncio.sleep(self.config.health_check_interval)

    async def update_weight(self, weight: float) -> None:
        self.sem.update_weight(weight)
        self.eval_sem.update_weight(weight)

    async def close(self) -> None:
        self.versions.close()
        if self._probe_task is not None:
            self._probe_task.cancel()
            self._probe_task = None
        if self.check_task is not None:
            self.check_task.cancel()
            self.check_task = None
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # --- retries -----------------------------------------------------------------------------
    def request_timeout(self, body: dict[str, Any]) -> float:
        """Seconds one attempt of ``body`` may take: ``timeout_base`` plus its ``max_tokens`` at
        ``min_tokens_per_second``, at most ``timeout`` (just ``timeout`` without ``max_tokens``)."""
        cap = float(self.config.timeout)
        tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
            return cap
        return min(cap, self.config.timeout_base + tokens / self.config.min_tokens_per_second)

    async def _attempt(self, fn: Any, args: tuple, kwargs: dict[str, Any], limit: float) -> Any:
        """One attempt of ``fn``: ``ServerDown`` past ``limit`` seconds, ``ServerSilent`` past
        ``silence_limit`` while the server was never seen alive and a probe gets no answer."""
        start = time.monotonic()
        call = asyncio.ensure_future(fn(*args, **kwargs))
        try:
            silence = self.silence_limit
            if not self.alive_seen and silence is not None and silence < limit:
                await asyncio.wait({call}, timeout=silence)
                if not call.done() and not self.alive_seen and not await self.shared_probe():
                    raise ServerSilent(
                        f"{self.config.base_url} accepted connections but answered nothing, "
                        "not even a health probe"
                    )
            await asyncio.wait({call}, timeout=max(0.0, limit - (time.monotonic() - start)))
            if not call.done():
                raise await self._no_answer(limit)
            return call.result()
        finally:
            if not call.done():
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
            elif not call.cancelled():
                call.exception()  # an attempt abandoned after it failed is retrieved: no stray log

    async def _no_answer(self, limit: float) -> ServerDown:
        """Why an attempt ran out of time; a server that answers its health probe is alive but
        slower than the limit assumes (a CPU server shared by many requests): a ``ServerSlow`` whose
        words name the settings that set the limit."""
        words = f"no answer within {limit:.0f}s"
        if not (self.alive_seen or await self.shared_probe()):
            return ServerDown(words)
        return ServerSlow(
            f"{words} (the server answers its health probe: it generates slower than "
            f"--openai.min_tokens_per_second {self.config.min_tokens_per_second:g} per request "
            f"allows; the limit is --openai.timeout_base {self.config.timeout_base:g} s + "
            "max_tokens / that)"
        )

    async def _with_retries(self, split: str, fn, *args: Any, **kwargs: Any) -> Any:
        self._ensure_health_task()
        sem = self.sem if split == "train" else self.eval_sem
        timings = self.request_timings if split == "train" else self.eval_request_timings
        if split == "eval" and args and isinstance(args[0], dict):
            cap = args[0].get("max_tokens") or args[0].get("max_completion_tokens")
            if isinstance(cap, int):
                self.eval_max_tokens.add(cap)
            temperature, n = args[0].get("temperature"), args[0].get("n")
            self.eval_sampling.add(
                (
                    float(temperature) if isinstance(temperature, (int, float)) else None,
                    int(n) if isinstance(n, int) else 1,
                )
            )
        body = args[0] if args and isinstance(args[0], dict) else kwargs
        limit = self.request_timeout(body)
        delay = 0.2
        last: Optional[BaseException] = None
        for attempt in range(1, self.config.max_retries + 1):
            async with sem:
                start = time.monotonic()
                try:
                    out = await self._attempt(fn, args, kwargs, limit)
                    self.answered += 1
                    self.alive_seen = True
                    timings.append(time.monotonic() - start)
                    (self.attempts_list if split == "train" else self.eval_attempts_list).append(
                        attempt
                    )
                    return out
                except ServerSilent:  # retrying would only wait as long again
                    self.failures += 1
                    self.server_healthy = False
                    raise
                except ServerDown as e:
                    last = e
                    self.failures += 1
            if attempt < self.config.max_retries:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.server_healthy = False if self._should_health_check() else self.server_healthy
        kind = ServerSlow if isinstance(last, ServerSlow) else ServerDown
        raise kind(
            f"{self.config.base_url or 'server'} failed {self.config.max_retries} attempts: {last}"
        ) from last

    async def _post(self, url: str, body: dict[str, Any]) -> Any:
        try:
            r = await self.http.post(url, json=body)
        except httpx.HTTPError as e:
            raise ServerDown(f"POST {url}: {e!r}") from e
        if r.status_code >= 500 or r.status_code == 429:
            raise ServerDown(f"POST {url}: {r.status_code} {r.text[:200]}")
        if r.status_code >= 400:
            self.answered += 1  # it answered: the URL is right, the request is not
            self.alive_seen = True
            raise rejected(url, body.get("model"), r.status_code, r.text)
        data = r.json()
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            self.served_model = data["model"]
        return data

    # --- public API (Atropos names) ----------------------------------------------------------
    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        answer, _ = await self._issue(kwargs, self._request_chat, _choice_stamps, reasoning=True)
        return answer

    async def _issue(
        self, kwargs: dict[str, Any], request: Any, stamps_of: Any, reasoning: bool = False
    ) -> tuple[Any, list[Optional[Span]]]:
        """What every public request does around ``request(kwargs)``: take out our own arguments
        (``split``, ``skip_reasoning``), add the env's thinking settings to a chat request
        (``reasoning``), name the configured model, and run it with retries, versioned."""
        split = kwargs.pop("split", "train")
        if not kwargs.pop("skip_reasoning", False) and reasoning:
            self._add_reasoning(kwargs)
        kwargs.setdefault("model", self.config.model_name)
        return await self._versioned(lambda: self._with_retries(split, request, kwargs), stamps_of)

    def _add_reasoning(self, kwargs: dict[str, Any]) -> None:
        """Chat requests carry the env's thinking settings in the backend's own terms: vLLM's
        (``chat_template_kwargs.enable_thinking``, ``thinking_token_budget``)."""
        if self.reasoning.get("thinking_mode"):
            kwargs["chat_template_kwargs"] = {
                "enable_thinking": True,
                **(kwargs.get("chat_template_kwargs") or {}),
            }
        if self.reasoning.get("max_reasoning_tokens"):
            kwargs.setdefault("thinking_token_budget", self.reasoning["max_reasoning_tokens"])

    async def completion(self, **kwargs: Any) -> Completion:
        answer, _ = await self._issue(kwargs, self._request_completion, _choice_stamps)
        return answer

    async def tokens_and_logprobs_completion(self, **kwargs: Any) -> TokensAndLogprobs:
        answer, spans = await self._issue(kwargs, self._request_tokens, result_versions)
        prompt, outs, lps, reasons = answer
        return TokenResult(prompt, outs, lps, reasons, spans)

    # --- weights versions --------------------------------------------------------------------
    async def _read_weights_version(self) -> Optional[int]:
        """The server's current weights version (None: not labelled yet); ``LookupError`` when
        the server cannot report one. Backends that can answer override it."""
        raise LookupError("this server reports no weights version")

    async def _versioned(self, call: Any, stamps_of: Any) -> tuple[Any, list[Optional[Span]]]:
        """Run ``call``; the answer and one weights-version span per output: stamped by the
        server where it did that, else bracketed by reads of its current version."""
        first = await self.versions.recent_lower(VERSION_READ_MAX_AGE)
        answer = await call()
        spans: list[Optional[Span]] = list(stamps_of(answer))
        if any(s is None for s in spans) and self.versions.supported is not False:
            last = await self.versions.upper()
            bracket = merge(
                (first, first) if first is not None else None,
                (last, last) if last is not None else None,
            )
            spans = [s if s is not None else bracket for s in spans]
        for s in spans:
            if s is not None:
                self.versions.last = max(self.versions.last or 0, s[1])
        note_versions(spans)
        return answer, spans

    async def _request_chat(self, kwargs: dict[str, Any]) -> ChatCompletion:
        raise NotImplementedError

    async def _request_completion(self, kwargs: dict[str, Any]) -> Completion:
        raise NotImplementedError

    async def _request_tokens(self, kwargs: dict[str, Any]) -> TokensAndLogprobs:
        raise InferenceError(
            f"server_type={self.config.server_type!r} does not return token ids; use server_type vllm or sglang "
            "for token-exact training data, or tokenize_for_trainer() on the text"
        )

    async def wandb_metrics(
        self, metrics: Optional[dict[str, Any]], server_name: Optional[str]
    ) -> dict[str, Any]:
        metrics = {} if metrics is None else metrics
        name = server_name or "server"
        if self.request_timings:
            metrics[f"server/{name}_request_time_avg"] = sum(self.request_timings) / len(
                self.request_timings
            )
        if self.eval_request_timings:
            metrics[f"server/{name}_eval_request_time_avg"] = sum(self.eval_request_timings) / len(
                self.eval_request_timings
            )
        if self.attempts_list:
            metrics[f"server/{name}_average_num_attempts"] = sum(self.attempts_list) / len(
                self.attempts_list
            )
        return metrics


def _choice_stamps(answer: Any) -> list[Optional[Span]]:
    """The span each choice of an OpenAI-shaped answer was stamped with (``weight_versions``)."""
    out: list[Optional[Span]] = []
    for choice in getattr(answer, "choices", None) or []:
        extra = getattr(choice, "model_extra", None) or {}
        out.append(span_from_stamps(extra.get("weight_versions")))
    return out


async def read_version_route(server: APIServer, path: str, key: str) -> Optional[int]:
    """``GET`` the server root's ``path`` and parse its ``key`` as a weights version; a 404 (or
    405) is ``LookupError``: the server has no such route."""
    url = api_root(server.config.base_url or "") + path
    r = await server.http.get(url, timeout=10.0)
    if r.status_code in (404, 405):
        raise LookupError(f"{url}: {r.status_code}")
    if r.status_code >= 400:
        raise RuntimeError(f"{url}: {r.status_code}")
    body = r.json()
    return parse_version(body.get(key)) if isinstance(body, dict) else None


__all__ = [
    "APIServer",
    "ServerDown",
    "ServerSilent",
    "TokensAndLogprobs",
    "api_root",
    "read_version_route",
]

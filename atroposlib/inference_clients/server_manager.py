"""``ServerManager``: one front for one or many inference servers (Atropos's name and methods).

Routing picks the healthy server with the most free request slots (least loaded); a request that
fails on a server after that server's retries fails over to another healthy one; when none is
healthy it waits (health polls bring servers back) up to ``unavailable_wait`` seconds and then
raises ``InferenceUnavailable``. ``n`` larger than ``max_n_completions`` is split across calls.
``unavailable_wait`` is also how long a server that never answered anything may stay silent on a
request (``APIServer.silence_limit``): one that accepts connections and never answers is then as
unreachable as one that refuses them.
``update_weight`` scales every server's concurrency by the env's weight from the API.
While a server that never answered keeps failing, ``waiting.UnreachableReport`` says so at once and
then every ``progress_interval`` seconds (what is waited for, why, for how long).

Managed sessions share one ``ManagedStats`` (``managed_stats``: token drifts, dropped episodes, tool
calls that did not parse), reported with the servers' metrics; ``on_token_drift`` (``keep``,
``split``, ``drop``) is what a session does about a drift (see ``managed_server``).

Atropos's managed-server settings: ``tool_parser`` (``"hermes"``: tool calls of a managed
``chat_completion`` are parsed into ``message.tool_calls``; an env may set ``self.server.tool_parser``),
``proxy_url`` / ``use_proxy`` (or ``ATROPOS_PROXY_URL``): ``managed_server()`` then opens a session on
that managed-server proxy instead of tracking in this process (see ``proxy_client``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Optional, Union

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceUnavailable
from atroposlib.inference_clients.answers import merge_choices
from atroposlib.inference_clients.backend import (
    APIServer,
    ServerDown,
    ServerSlow,
    TokensAndLogprobs,
)
from atroposlib.inference_clients.backends.scripted import ScriptedServer
from atroposlib.inference_clients.config import APIServerConfig, ReasoningConfig, ServerBaseline
from atroposlib.inference_clients.managed_server import (
    DRIFT_MODES,
    DummyManagedServer,
    ManagedServer,
    dummy_allowed,
)
from atroposlib.inference_clients.managed_stats import ManagedStats
from atroposlib.inference_clients.registry import backend_class
from atroposlib.inference_clients.waiting import UnreachableReport, why_down
from atroposlib.inference_clients.weights_version import TokenResult, result_versions

logger = logging.getLogger(__name__)


def local_server_configs(baseline: ServerBaseline) -> list[APIServerConfig]:
    """What a bare ``ServerBaseline`` means (as in Atropos): local servers on ports 9004-9007."""
    fields = {k: getattr(baseline, k) for k in type(baseline).model_fields}
    return [
        APIServerConfig(**fields, base_url=f"http://localhost:{9004 + i}/v1", api_key="x")
        for i in range(4)
    ]


def _free_slots(sem: Any) -> int:
    """Free slots of our semaphore, or of an ``asyncio.Semaphore`` an Atropos-style server brings."""
    return sem.available() if hasattr(sem, "available") else int(getattr(sem, "_value", 0))


class ServerManager:
    """Routes requests over ``servers``; also hands out ``managed_server`` contexts."""

    max_n_completions: int = 8
    unavailable_wait: float = 120.0  # class defaults too: Atropos code builds bare managers

    def __init__(
        self,
        configs: Union[ServerBaseline, APIServerConfig, list[APIServerConfig]],
        server_class: Optional[type] = None,
        slurm: bool = False,
        testing: bool = False,
        max_n_completions: int = 8,
        unavailable_wait: float = 120.0,
        progress_interval: float = 15.0,
        reasoning_config: Optional[ReasoningConfig] = None,
        proxy_url: Optional[str] = None,
        use_proxy: bool = False,
        tool_parser: Optional[str] = None,
        on_token_drift: str = "keep",
        **_: Any,
    ) -> None:
        if on_token_drift not in DRIFT_MODES:
            raise ValueError(
                f"on_token_drift must be one of {', '.join(DRIFT_MODES)}, got {on_token_drift!r}"
            )
        self.on_token_drift = on_token_drift
        self.managed_stats = ManagedStats()
        self.tool_parser = tool_parser
        self.proxy_url = proxy_url or os.environ.get("ATROPOS_PROXY_URL") or None
        self.use_proxy = use_proxy or bool(self.proxy_url)
        self.max_n_completions = max_n_completions
        self.unavailable_wait = unavailable_wait
        self.waiting = UnreachableReport(unavailable_wait, progress_interval)
        self.reasoning: dict[str, Any] = {}
        self._reported_down: set[int] = set()
        if testing:  # --testing: the scripted in-process backend, no HTTP
            self.servers: list[APIServer] = [ScriptedServer()]
            return
        self.reasoning_config = reasoning_config
        if isinstance(configs, APIServerConfig):
            configs = [configs]
        elif not isinstance(configs, list):
            configs = local_server_configs(configs)
        if not configs:
            raise ValueError("ServerManager needs at least one server config")
        if slurm and os.environ.get("SLURM_JOB_NODELIST"):
            logger.warning(
                "slurm: using the configured servers as given (no node discovery is done here)"
            )
        self.servers = [
            (server_class or backend_class(c.server_type))(c)
            for c in configs  # type: ignore[misc]
        ]
        for s in self.servers:
            if isinstance(s, APIServer):
                s.silence_limit = unavailable_wait
        if reasoning_config is not None and reasoning_config.enabled:  # Atropos's way to ask
            self.set_reasoning(True, reasoning_config.effort)

    # --- routing -----------------------------------------------------------------------------
    def _pick(self, split: str, exclude: set[int]) -> Optional[APIServer]:
        best, best_free = None, None
        for s in self.servers:
            if id(s) in exclude or not s.server_healthy:
                continue
            free = _free_slots(s.sem if split == "train" else s.eval_sem)
            if best_free is None or free > best_free:
                best, best_free = s, free
        return best

    async def _route(self, method: str, kwargs: dict[str, Any]) -> Any:
        split = kwargs.get("split", "train")
        tried: set[int] = set()
        deadline = time.monotonic() + self.unavailable_wait
        last: Optional[BaseException] = None
        last_url = ""
        while True:
            server = self._pick(split, tried)
            if server is None:
                if time.monotonic() > deadline:
                    why = f"{last_url}: {why_down(last)}" if last is not None else "no server tried"
                    raise InferenceUnavailable(
                        f"no inference server answered within {self.unavailable_wait:.0f}s ({why})",
                        slow=isinstance(last, ServerSlow),
                    )
                self.waiting.tick()
                await asyncio.sleep(1.0)
                untried = [s for s in self.servers if id(s) not in tried]
                if not untried:
                    tried.clear()
                    continue
                # None looks healthy: the request itself is the probe (a dead server fails fast).
                server = untried[0]
            try:
                out = await getattr(server, method)(**dict(kwargs))
            except ServerDown as e:
                last, last_url = e, server.config.base_url or "server"
                tried.add(id(server))
                if not getattr(server, "answered", 0):  # never answered: wrong URL, or starting
                    self.waiting.failed(last_url, e)
                elif id(server) not in self._reported_down:  # once per outage, not per request
                    self._reported_down.add(id(server))
                    logger.warning(
                        "inference server %s failed (%s); failing over, retrying until it answers",
                        server.config.base_url,
                        e,
                    )
            else:
                self._reported_down.discard(id(server))
                self.waiting.answered(server.config.base_url or "server")
                return out

    async def _split_n(self, method: str, kwargs: dict[str, Any]) -> list[Any]:
        n = int(kwargs.get("n", 1) or 1)
        if n <= self.max_n_completions:
            return [await self._route(method, kwargs)]
        parts = []
        while n > 0:
            k = min(n, self.max_n_completions)
            parts.append(self._route(method, {**kwargs, "n": k}))
            n -= k
        return list(await asyncio.gather(*parts))

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        return merge_choices(await self._split_n("chat_completion", kwargs))

    async def completion(self, **kwargs: Any) -> Completion:
        return merge_choices(await self._split_n("completion", kwargs))

    async def tokens_and_logprobs_completion(self, **kwargs: Any) -> TokensAndLogprobs:
        results = await self._split_n("tokens_and_logprobs_completion", kwargs)
        prompt, outs, lps, reasons, versions = results[0][0], [], [], [], []
        for result in results:
            _, o, lp, r = result
            outs.extend(o)
            lps.extend(lp)
            reasons.extend(r)
            versions.extend(result_versions(result))
        return TokenResult(prompt, outs, lps, reasons, versions)

    async def get_logprobs(self, **kwargs: Any) -> dict[str, Any]:
        """Prompt logprobs from the least loaded healthy server (Atropos's schema:
        ``prompt_tokens``, ``prompt_topk_token_ids``, ``prompt_topk_logprobs``; see ``logprobs``)."""
        return await self._route("get_logprobs", kwargs)

    def set_reasoning(
        self,
        thinking_mode: bool = False,
        reasoning_effort: Optional[str] = None,
        max_reasoning_tokens: Optional[int] = None,
    ) -> None:
        """Chat requests then ask for thinking (vLLM/SGLang: ``chat_template_kwargs.enable_thinking``;
        OpenAI: ``reasoning_effort``) and cap it at ``max_reasoning_tokens`` (vLLM's
        ``thinking_token_budget``, which needs its ``--reasoning-parser``); pass
        ``skip_reasoning=True`` to a call to opt out."""
        self.reasoning = {
            "thinking_mode": thinking_mode,
            "reasoning_effort": reasoning_effort,
            "max_reasoning_tokens": max_reasoning_tokens,
        }
        for s in self.servers:
            s.reasoning = dict(self.reasoning)

    async def update_weight(self, weight: float) -> None:
        for s in self.servers:
            await s.update_weight(weight)

    @property
    def ever_answered(self) -> bool:
        """Whether any server has answered a request (a URL that never did is probably wrong)."""
        return any(getattr(s, "answered", 0) for s in self.servers)

    @property
    def supports_tokens(self) -> bool:
        return all(getattr(s, "supports_tokens", False) for s in self.servers)

    @asynccontextmanager
    async def managed_server(
        self,
        tokenizer: Any = None,
        track_tree: bool = False,
        base_url: Optional[str] = None,
        preserve_think_blocks: bool = False,
        on_token_drift: Optional[str] = None,
    ) -> AsyncIterator[Any]:
        """Context whose calls record exact tokens/masks/logprobs (see ``managed_server`` module).

        ``base_url`` pins the session to that one server (no failover); ``preserve_think_blocks``
        keeps replayed ``<think>`` blocks in the re-rendered conversation; ``on_token_drift``
        (``keep``/``split``/``drop``) overrides the manager's setting for this session. Its counts
        go to ``managed_stats``. With ``use_proxy`` the session lives on the managed-server proxy at
        ``proxy_url`` (its counts stay there)."""
        if self.use_proxy:
            if not self.proxy_url:
                raise ValueError(
                    "use_proxy=True needs proxy_url= (or ATROPOS_PROXY_URL) when the ServerManager "
                    "is made"
                )
            from atroposlib.inference_clients.proxy_client import create_proxy_session

            session = await create_proxy_session(
                self.proxy_url,
                base_url=base_url,
                tool_parser=self.tool_parser or "hermes",
                track_tree=track_tree,
                model_name=self.servers[0].config.model_name if self.servers else "unknown",
            )
            try:
                yield session
            finally:
                await session.cleanup()
            return
        target: Any = self
        if base_url is not None:
            wanted = base_url.rstrip("/")
            pinned = [s for s in self.servers if (s.config.base_url or "").rstrip("/") == wanted]
            if not pinned:
                known = ", ".join(s.config.base_url or "(none)" for s in self.servers)
                raise ValueError(f"managed_server(base_url={base_url!r}): no such server ({known})")
            target = pinned[0]
        if not getattr(target, "supports_tokens", False):
            if not dummy_allowed():
                raise NotImplementedError(
                    "managed_server needs token ids, which server_type 'openai' cannot return; use "
                    "--openai.server_type vllm (or sglang), or set ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1 "
                    "to tokenize the text locally with placeholder logprobs"
                )
            self.managed_stats.sessions += 1
            yield DummyManagedServer(target, tokenizer, stats=self.managed_stats)
            return
        managed = ManagedServer(
            target,
            tokenizer,
            track_tree=track_tree,
            thinking=bool(self.reasoning.get("thinking_mode")),
            tool_parser=self.tool_parser,
            preserve_think_blocks=preserve_think_blocks,
            on_token_drift=on_token_drift or self.on_token_drift,
            stats=self.managed_stats,
        )
        self.managed_stats.sessions += 1
        try:
            yield managed
        finally:
            managed.reset()

    @asynccontextmanager
    async def dedicated_server(self) -> AsyncIterator[APIServer]:
        server = self._pick("train", set()) or self.servers[0]
        async with server.sem:
            yield server

    async def wandb_metrics(self) -> dict[str, Any]:
        """Each server's request metrics, and what the managed sessions counted
        (``managed/token_drifts``, ``managed/tool_call_parse_errors``, ...)."""
        metrics: dict[str, Any] = {}
        for i, s in enumerate(self.servers):
            await s.wandb_metrics(metrics, f"server_{i}")
        metrics.update(self.managed_stats.metrics())
        return metrics

    async def close(self) -> None:
        for s in self.servers:
            await s.close()


__all__ = ["APIServerConfig", "ServerBaseline", "ServerManager", "local_server_configs"]

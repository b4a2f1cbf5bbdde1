"""Typed client of the trajectory API (sync and async), used by envs, the trainer and the tools.

Every endpoint is described once in ``_Endpoints``: a method builds a request and names the model
that parses the answer. ``TrajectoryClient`` sends it with ``httpx.Client``, ``AsyncTrajectoryClient``
with ``httpx.AsyncClient``, so the two never drift. Bodies are serialized with orjson and gzipped
above ``gzip_min_bytes``; a bearer token is sent when given; connection errors and 503s are retried
with exponential backoff (tenacity), honouring ``Retry-After``; other 4xx/5xx raise ``APIError``.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Optional, TypeVar, Union

import httpx
import orjson
from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from atroposlib.api.wire import ACK_MODE_HEADER, load_batch_body
from atroposlib.errors import APIError, APIUnavailable, AuthError
from atroposlib.type_definitions import (
    BatchAck,
    BatchResponse,
    EnvIdentifier,
    Info,
    PeekResponse,
    RegisterEnv,
    RegisterEnvResponse,
    RegisterResponse,
    Registration,
    ScoredData,
    ScoredDataGroup,
    ScoredDataListResponse,
    ScoredDataResponse,
    Status,
    StatusEnv,
    WandbInfo,
)

T = TypeVar("T")
GroupLike = Union[ScoredData, ScoredDataGroup, dict[str, Any]]


Json = Any  # a parsed JSON answer the API does not describe with a model


@dataclass
class _Request(Generic[T]):
    """One call of an endpoint: what to send, and how to parse the answer into a ``T``."""

    method: str
    path: str
    body: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    parse: Callable[[Any], T] = lambda data: data
    text: bool = False  # the endpoint answers plain text (legacy /reset_data)
    # how to turn the body (and its headers) into JSON data; None: one orjson parse
    load: Optional[Callable[[bytes, Mapping[str, str]], Any]] = None
    headers: dict[str, str] = field(default_factory=dict)


def _dump_group(group: GroupLike) -> dict[str, Any]:
    if isinstance(group, BaseModel):
        return group.model_dump(exclude_none=True)
    return {k: v for k, v in dict(group).items() if v is not None}


class _Endpoints:
    """One request builder per endpoint, the only place an endpoint is described.

    ``TrajectoryClient`` and ``AsyncTrajectoryClient`` each expose one typed method per builder that
    sends its request (tests/api/test_client_endpoints.py checks the two sets stay the same).
    """

    # --- liveness -------------------------------------------------------------------------
    @staticmethod
    def root() -> _Request[Json]:
        return _Request("GET", "/")

    @staticmethod
    def health() -> _Request[Json]:
        return _Request("GET", "/health")

    # --- trainer side ---------------------------------------------------------------------
    @staticmethod
    def register(registration: Registration) -> _Request[RegisterResponse]:
        return _Request(
            "POST", "/register", registration.model_dump(), parse=RegisterResponse.model_validate
        )

    @staticmethod
    def get_batch(explicit_ack: bool = True) -> _Request[BatchResponse]:
        return _Request(
            "GET",
            "/batch",
            parse=BatchResponse.model_validate,
            load=load_batch_body,
            headers={ACK_MODE_HEADER: "explicit"} if explicit_ack else {},
        )

    @staticmethod
    def ack_batch(batch_id: str) -> _Request[Json]:
        return _Request("POST", "/batch/ack", BatchAck(batch_id=batch_id).model_dump())

    # --- env side -------------------------------------------------------------------------
    @staticmethod
    def register_env(register_env: RegisterEnv) -> _Request[RegisterEnvResponse]:
        return _Request(
            "POST",
            "/register-env",
            register_env.model_dump(),
            parse=RegisterEnvResponse.model_validate,
        )

    @staticmethod
    def disconnect_env(env_id: int) -> _Request[Json]:
        return _Request("POST", "/disconnect-env", EnvIdentifier(env_id=env_id).model_dump())

    @staticmethod
    def post_scored_data(group: GroupLike) -> _Request[ScoredDataResponse]:
        return _Request(
            "POST", "/scored_data", _dump_group(group), parse=ScoredDataResponse.model_validate
        )

    @staticmethod
    def post_scored_data_list(groups: Iterable[GroupLike]) -> _Request[ScoredDataListResponse]:
        return _Request(
            "POST",
            "/scored_data_list",
            [_dump_group(g) for g in groups],
            parse=ScoredDataListResponse.model_validate,
        )

    @staticmethod
    def status_env(env_id: int) -> _Request[StatusEnv]:
        # a GET with a JSON body, as Atropos clients send it
        return _Request(
            "GET",
            "/status-env",
            EnvIdentifier(env_id=env_id).model_dump(),
            parse=StatusEnv.model_validate,
        )

    # --- shared / tools -------------------------------------------------------------------
    @staticmethod
    def info() -> _Request[Info]:
        return _Request("GET", "/info", parse=Info.model_validate)

    @staticmethod
    def wandb_info() -> _Request[WandbInfo]:
        return _Request("GET", "/wandb_info", parse=WandbInfo.model_validate)

    @staticmethod
    def status() -> _Request[Status]:
        return _Request("GET", "/status", parse=Status.model_validate)

    @staticmethod
    def latest_example() -> _Request[Json]:
        return _Request("GET", "/latest_example")

    @staticmethod
    def peek(
        limit: int = 50, after: Optional[int] = None, env: Optional[str] = None
    ) -> _Request[PeekResponse]:
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        if env is not None:
            params["env"] = env
        return _Request("GET", "/peek", params=params, parse=PeekResponse.model_validate)

    @staticmethod
    def reset() -> _Request[Json]:
        return _Request("POST", "/reset")

    @staticmethod
    def reset_data_legacy() -> _Request[str]:
        return _Request("GET", "/reset_data", text=True, parse=str)


def _encode(body: Any, gzip_min_bytes: int) -> tuple[Optional[bytes], dict[str, str]]:
    if body is None:
        return None, {}
    raw = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    if gzip_min_bytes >= 0 and len(raw) >= gzip_min_bytes:
        raw = gzip.compress(raw, compresslevel=1)
        headers["Content-Encoding"] = "gzip"
    return raw, headers


def _decode(req: _Request[T], resp: httpx.Response) -> T:
    if resp.status_code == 503 or resp.status_code == 429:
        retry_after = resp.headers.get("Retry-After")
        raise APIUnavailable(
            f"{req.method} {req.path}: {resp.status_code} {resp.text[:200]}",
            retry_after=float(retry_after)
            if retry_after and retry_after.replace(".", "").isdigit()
            else None,
        )
    if resp.status_code >= 400:
        try:
            payload = orjson.loads(resp.content)
            message = payload.get("error") or payload.get("detail") or resp.text
            detail = payload.get("detail")
        except (orjson.JSONDecodeError, AttributeError):
            message, detail = resp.text, None
        cls = AuthError if resp.status_code in (401, 403) else APIError
        raise cls(resp.status_code, str(message), detail)
    if req.text:
        return req.parse(resp.text)
    if not resp.content:
        data = None
    elif req.load is not None:
        data = req.load(resp.content, resp.headers)
    else:
        data = orjson.loads(resp.content)
    return req.parse(data)


def _wait_with_retry_after(base: Callable[..., float]) -> Callable[..., float]:
    def wait(retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, APIUnavailable) and exc.retry_after is not None:
            return min(exc.retry_after, 30.0)
        return base(retry_state)

    return wait


def _is_loopback(url: str) -> bool:
    host = (httpx.URL(url).host or "").lower()
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


class _Base:
    def __init__(
        self,
        base_url: str = "http://localhost:8000",
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        retries: int = 5,
        retry_max_seconds: float = 120.0,
        gzip_min_bytes: Optional[int] = None,
        accept_gzip: Optional[bool] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = max(1, retries)
        self.retry_max_seconds = retry_max_seconds
        # Compression pays off across a network, not over loopback where it only costs CPU
        # (gzip of a 1 MB group takes ~8 ms): by default it is off for localhost URLs.
        local = _is_loopback(self.base_url)
        if gzip_min_bytes is None:
            gzip_min_bytes = -1 if local else 64 * 1024
        if accept_gzip is None:
            accept_gzip = not local
        self.gzip_min_bytes = gzip_min_bytes
        self._headers = {"Accept-Encoding": "gzip" if accept_gzip else "identity"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def _build(
        self, http: Union[httpx.Client, httpx.AsyncClient], req: _Request[Any]
    ) -> httpx.Request:
        """The HTTP request for ``req``: its body as JSON, gzipped when large enough."""
        content, headers = _encode(req.body, self.gzip_min_bytes)
        return http.build_request(
            req.method,
            req.path,
            content=content,
            headers={**headers, **req.headers},
            params=req.params,
        )

    def _unreachable(self, req: _Request[Any], e: httpx.TransportError) -> APIUnavailable:
        return APIUnavailable(f"{req.method} {req.path}: cannot reach {self.base_url}: {e!r}")

    def _retry_kwargs(self) -> dict[str, Any]:
        return dict(
            retry=retry_if_exception_type(APIUnavailable),
            stop=stop_after_attempt(self.retries) | stop_after_delay(self.retry_max_seconds),
            wait=_wait_with_retry_after(wait_exponential(multiplier=0.2, max=10)),
            reraise=True,
        )


class TrajectoryClient(_Base):
    """Synchronous client. ``with TrajectoryClient(url) as c: c.status()``."""

    def __init__(self, base_url: str = "http://localhost:8000", **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=self.timeout
        )

    def _send_once(self, req: _Request[T]) -> T:
        try:
            resp = self._http.send(self._build(self._http, req))
        except httpx.TransportError as e:
            raise self._unreachable(req, e) from e
        return _decode(req, resp)

    def _call(self, req: _Request[T]) -> T:
        for attempt in Retrying(**self._retry_kwargs()):
            with attempt:
                return self._send_once(req)
        raise AssertionError("unreachable: the retry loop returns or re-raises")

    # --- liveness -------------------------------------------------------------------------
    def root(self) -> Json:
        return self._call(_Endpoints.root())

    def health(self) -> Json:
        return self._call(_Endpoints.health())

    # --- trainer side ---------------------------------------------------------------------
    def register(self, registration: Registration) -> RegisterResponse:
        """``POST /register``; returns ``RegisterResponse`` (uuid)."""
        return self._call(_Endpoints.register(registration))

    def get_batch(self, explicit_ack: bool = True) -> BatchResponse:
        """``GET /batch``; ``BatchResponse.batch`` is None while no full batch is ready.

        With ``explicit_ack`` (the default) the caller promises to ``ack_batch`` every batch it
        applies, so the API delivers an unacknowledged batch again rather than treating this call
        as its acknowledgement (Atropos's implicit ack, kept for ``explicit_ack=False``). A batch
        that cannot be parsed raises ``BatchUndeliverable`` (an ``APIUnavailable``): calling again
        makes the API check the batch and quarantine what cannot be delivered."""
        return self._call(_Endpoints.get_batch(explicit_ack))

    def ack_batch(self, batch_id: str) -> Json:
        """``POST /batch/ack``: the batch was applied and must never be redelivered."""
        return self._call(_Endpoints.ack_batch(batch_id))

    # --- env side -------------------------------------------------------------------------
    def register_env(self, register_env: RegisterEnv) -> RegisterEnvResponse:
        """``POST /register-env``; ``status == "wait for trainer to start"`` until the trainer pulls."""
        return self._call(_Endpoints.register_env(register_env))

    def disconnect_env(self, env_id: int) -> Json:
        return self._call(_Endpoints.disconnect_env(env_id))

    def post_scored_data(self, group: GroupLike) -> ScoredDataResponse:
        """``POST /scored_data``: a 200 means the group is committed."""
        return self._call(_Endpoints.post_scored_data(group))

    def post_scored_data_list(self, groups: Iterable[GroupLike]) -> ScoredDataListResponse:
        return self._call(_Endpoints.post_scored_data_list(groups))

    def status_env(self, env_id: int) -> StatusEnv:
        """``GET /status-env`` with a JSON body, as Atropos clients send it."""
        return self._call(_Endpoints.status_env(env_id))

    # --- shared / tools -------------------------------------------------------------------
    def info(self) -> Info:
        return self._call(_Endpoints.info())

    def wandb_info(self) -> WandbInfo:
        return self._call(_Endpoints.wandb_info())

    def status(self) -> Status:
        return self._call(_Endpoints.status())

    def latest_example(self) -> Json:
        return self._call(_Endpoints.latest_example())

    def peek(
        self, limit: int = 50, after: Optional[int] = None, env: Optional[str] = None
    ) -> PeekResponse:
        """``GET /peek``: recent groups, read-only (never consumes, never resets)."""
        return self._call(_Endpoints.peek(limit, after, env))

    def reset(self) -> Json:
        """``POST /reset``: wipe the run (queue, registration, envs). Destructive."""
        return self._call(_Endpoints.reset())

    def reset_data_legacy(self) -> str:
        return self._call(_Endpoints.reset_data_legacy())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TrajectoryClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncTrajectoryClient(_Base):
    """Asynchronous client with the same methods (each returns an awaitable)."""

    def __init__(self, base_url: str = "http://localhost:8000", **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=self.timeout
        )

    async def _send_once(self, req: _Request[T]) -> T:
        try:
            resp = await self._http.send(self._build(self._http, req))
        except httpx.TransportError as e:
            raise self._unreachable(req, e) from e
        return _decode(req, resp)

    async def _call(self, req: _Request[T]) -> T:
        async for attempt in AsyncRetrying(**self._retry_kwargs()):
            with attempt:
                return await self._send_once(req)
        raise AssertionError("unreachable: the retry loop returns or re-raises")

    # The same endpoints as TrajectoryClient's (see its methods for what each does).
    async def root(self) -> Json:
        return await self._call(_Endpoints.root())

    async def health(self) -> Json:
        return await self._call(_Endpoints.health())

    async def register(self, registration: Registration) -> RegisterResponse:
        return await self._call(_Endpoints.register(registration))

    async def get_batch(self, explicit_ack: bool = True) -> BatchResponse:
        return await self._call(_Endpoints.get_batch(explicit_ack))

    async def ack_batch(self, batch_id: str) -> Json:
        return await self._call(_Endpoints.ack_batch(batch_id))

    async def register_env(self, register_env: RegisterEnv) -> RegisterEnvResponse:
        return await self._call(_Endpoints.register_env(register_env))

    async def disconnect_env(self, env_id: int) -> Json:
        return await self._call(_Endpoints.disconnect_env(env_id))

    async def post_scored_data(self, group: GroupLike) -> ScoredDataResponse:
        return await self._call(_Endpoints.post_scored_data(group))

    async def post_scored_data_list(self, groups: Iterable[GroupLike]) -> ScoredDataListResponse:
        return await self._call(_Endpoints.post_scored_data_list(groups))

    async def status_env(self, env_id: int) -> StatusEnv:
        return await self._call(_Endpoints.status_env(env_id))

    async def info(self) -> Info:
        return await self._call(_Endpoints.info())

    async def wandb_info(self) -> WandbInfo:
        return await self._call(_Endpoints.wandb_info())

    async def status(self) -> Status:
        return await self._call(_Endpoints.status())

    async def latest_example(self) -> Json:
        return await self._call(_Endpoints.latest_example())

    async def peek(
        self, limit: int = 50, after: Optional[int] = None, env: Optional[str] = None
    ) -> PeekResponse:
        return await self._call(_Endpoints.peek(limit, after, env))

    async def reset(self) -> Json:
        return await self._call(_Endpoints.reset())

    async def reset_data_legacy(self) -> str:
        return await self._call(_Endpoints.reset_data_legacy())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncTrajectoryClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


__all__ = ["AsyncTrajectoryClient", "GroupLike", "TrajectoryClient", "load_batch_body"]

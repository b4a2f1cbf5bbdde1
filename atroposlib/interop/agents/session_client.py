"""The harness's side of a proxy session: open one (with the episode's turn limit), read what it
recorded (nodes, the backend's ids per completion, whether the turn limit was hit), close it. A proxy
that refuses or cannot be reached raises ``InferenceError`` naming the call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import httpx

from atroposlib.errors import InferenceError
from atroposlib.inference_clients.managed_server import SequenceNode


@dataclass
class Recorded:
    """What a session recorded: its nodes, the backend's ids per completion (``{"prompt_token_ids",
    "token_ids"}``), the completions asked and whether the turn limit refused one."""

    nodes: list[SequenceNode]
    completions: list[dict[str, Any]]
    turns: int
    turn_limit_hit: bool


class SessionClient:
    def __init__(self, proxy_url: str, api_key: Optional[str], timeout: float = 60.0) -> None:
        self.proxy_url = proxy_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(base_url=self.proxy_url, headers=headers, timeout=timeout)

    def url_of(self, session: str) -> str:
        """The session's OpenAI base URL."""
        return f"{self.proxy_url}/{session}/v1"

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = await self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise InferenceError(f"proxy {self.proxy_url}: {method} {path}: {e!r}") from e
        if r.status_code != 200:
            raise InferenceError(f"proxy {method} {path}: {r.status_code} {r.text[:300]}")
        return r.json()

    async def open(self, max_turns: Optional[int]) -> str:
        body = {"max_turns": max_turns} if max_turns is not None else {}
        data = await self._call("POST", "/sessions/create", json=body)
        return str(data["uuid"])

    async def recorded(self, session: str) -> Recorded:
        data = await self._call("GET", f"/{session}/nodes")
        return Recorded(
            [SequenceNode(**n) for n in data.get("nodes", [])],
            list(data.get("completions") or []),
            int(data.get("turns", 0)),
            bool(data.get("turn_limit_hit")),
        )

    async def close(self, session: str) -> None:
        try:
            await self._call("DELETE", f"/{session}")
        except InferenceError:
            pass  # expired already: it only held memory

    async def health(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/health"))

    async def aclose(self) -> None:
        await self.http.aclose()


__all__ = ["Recorded", "SessionClient"]

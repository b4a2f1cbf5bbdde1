"""A managed-server session held on the managed-server proxy, over HTTP (Atropos's ``proxy_client``).

``ServerManager(..., proxy_url=URL)`` (or ``ATROPOS_PROXY_URL``) makes ``managed_server()`` yield a
``ProxyManagedServer``: the proxy (``managed_server_proxy``) renders, generates, parses tool calls and
tracks tokens; this client sends the chat requests of one session and reads its nodes back. Its
``get_url()`` is the session's OpenAI-compatible URL, for code that only speaks that API. The nodes
are fetched after every call, so ``get_state()`` answers at once, as in-process tracking does.
A proxy with a key (``atropos-proxy``'s ``ATROPOS_PROXY_API_KEY``) is sent that key: ``api_key``,
else the same environment variable.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any, Optional

import httpx
from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.errors import InferenceError
from atroposlib.inference_clients.managed_server import SequenceNode, ToolCallDict

logger = logging.getLogger(__name__)

_REQUEST_KEYS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "n",
    "stop",
    "tools",
    "tool_choice",
)
KEY_VARIABLE = "ATROPOS_PROXY_API_KEY"


def _error_text(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:200]
    err = body.get("error") if isinstance(body, dict) else None
    return str(err.get("message") if isinstance(err, dict) else body)[:300]


class ProxyManagedServer:
    """``chat_completion`` / ``get_state`` / ``reset`` of one proxy session (see module docstring)."""

    def __init__(
        self,
        proxy_url: str,
        session_uuid: str,
        model_name: str = "unknown",
        base_url: Optional[str] = None,
        timeout: float = 300.0,
        api_key: Optional[str] = None,
    ) -> None:
        self.proxy_url = proxy_url.rstrip("/")
        self.api_key = api_key or os.environ.get(KEY_VARIABLE) or None
        self.session_uuid = session_uuid
        self.model_name = model_name
        self.base_url = base_url
        self.timeout = timeout
        self._cached_nodes: Optional[list[SequenceNode]] = None

    def get_url(self) -> str:
        """The session's OpenAI-compatible base URL (``{proxy}/{uuid}/v1``)."""
        return f"{self.proxy_url}/{self.session_uuid}/v1"

    async def _call(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        url = f"{self.proxy_url}{path}"
        try:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
            async with httpx.AsyncClient(timeout=self.timeout, headers=headers) as client:
                r = await client.request(method, url, json=body)
        except httpx.HTTPError as e:
            raise InferenceError(f"managed-server proxy {self.proxy_url}: {e!r}") from e
        if r.status_code != 200:
            raise InferenceError(
                f"proxy {method} {path} failed ({r.status_code}): {_error_text(r)}"
            )
        return r.json()

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        body: dict[str, Any] = {"messages": [dict(m) for m in kwargs.get("messages", [])]}
        body.update({k: kwargs[k] for k in _REQUEST_KEYS if kwargs.get(k) is not None})
        data = await self._call("POST", f"/{self.session_uuid}/v1/chat/completions", body)
        completion = ChatCompletion.model_validate(
            {
                "id": data.get("id") or f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": data.get("created") or int(time.time()),
                "model": data.get("model") or self.model_name,
                "choices": [
                    {
                        "index": c.get("index", i),
                        "finish_reason": c.get("finish_reason") or "stop",
                        "message": {
                            "role": "assistant",
                            "content": (c.get("message") or {}).get("content"),
                        },
                    }
                    for i, c in enumerate(data.get("choices", []))
                ],
            }
        )
        for choice, raw in zip(completion.choices, data.get("choices", []), strict=True):
            calls = (raw.get("message") or {}).get("tool_calls")
            if calls:  # plain dicts, as the in-process managed server gives them
                as_dicts: list[Any] = [
                    ToolCallDict(
                        id=c.get("id"),
                        type="function",
                        function=ToolCallDict(**(c.get("function") or {})),
                    )
                    for c in calls
                ]
                choice.message.tool_calls = as_dicts
        await self.fetch_state()
        return completion

    async def completion(self, **kwargs: Any) -> Completion:
        raise NotImplementedError(
            "a proxy session serves chat completions only; use chat_completion() (the proxy "
            "renders the chat template)"
        )

    async def fetch_state(self) -> dict[str, Any]:
        """Read the session's nodes from the proxy (``get_state`` then returns them)."""
        data = await self._call("GET", f"/{self.session_uuid}/nodes")
        self._cached_nodes = [SequenceNode(**n) for n in data.get("nodes", [])]
        return {"nodes": list(self._cached_nodes)}

    def get_state(self) -> dict[str, Any]:
        return {"nodes": list(self._cached_nodes or [])}

    def reset(self) -> None:
        self._cached_nodes = None

    async def cleanup(self) -> None:
        """Delete the session on the proxy (a failure is logged: the session only costs memory)."""
        try:
            await self._call("DELETE", f"/{self.session_uuid}")
        except InferenceError as e:
            logger.warning("could not delete proxy session %s: %s", self.session_uuid, e)


async def create_proxy_session(
    proxy_url: str,
    base_url: Optional[str] = None,
    tool_parser: str = "hermes",
    track_tree: bool = False,
    model_name: str = "unknown",
    api_key: Optional[str] = None,
    max_turns: Optional[int] = None,
) -> ProxyManagedServer:
    """Open a session on the proxy (pinned to the server ``base_url`` when given; at most
    ``max_turns`` chat completions when given)."""
    body: dict[str, Any] = {"tool_parser": tool_parser, "track_tree": track_tree}
    if base_url:
        body["base_url"] = base_url
    if max_turns is not None:
        body["max_turns"] = max_turns
    probe = ProxyManagedServer(proxy_url, "", model_name, api_key=api_key)
    data = await probe._call("POST", "/sessions/create", body)
    return ProxyManagedServer(
        proxy_url,
        data["uuid"],
        model_name=data.get("model_name", model_name),
        base_url=data.get("base_url"),
        api_key=probe.api_key,
    )


__all__ = ["KEY_VARIABLE", "ProxyManagedServer", "create_proxy_session"]

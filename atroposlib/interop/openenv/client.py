"""A small client of OpenEnv's WebSocket protocol (``/ws``), spoken natively (no ``openenv`` import).

One ``OpenEnvSession`` is one WebSocket connection, i.e. one environment instance on the server. The
frames are JSON text: the client sends ``{"type": "reset", "data": {seed, ...}}``,
``{"type": "step", "data": {<action fields>}}`` and ``{"type": "close"}``; the server answers
``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d, "metadata"?}}`` or
``{"type": "error", "data": {"message", "code"}}`` (``CAPACITY_REACHED`` when it refuses another
session, sent right after the connection opens, then it closes). MCP requests ride the same session:
``{"type": "mcp", "data": <JSON-RPC request>}`` answered by ``{"type": "mcp", "data": <JSON-RPC response>}``.

Every wait has a timeout, so a server that stops answering never hangs an episode. What can go wrong
is an ``EpisodeError`` whose ``kind`` says which of a fixed set of things happened (``KINDS``).
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from atroposlib.errors import EpisodeError  # defined with the package's other errors

KINDS = EpisodeError.KINDS
"""The kinds of failed episode, with the words the env's one log line per kind uses."""


@dataclass
class StepResult:
    """One observation frame: the observation's own fields, its reward, whether the episode ended."""

    observation: dict[str, Any]
    reward: Optional[float] = None
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


def ws_url(url: str) -> str:
    """The session endpoint of a server URL (``http://h:p`` / ``ws://h:p`` / ``.../ws``), as openenv's
    own client forms it."""
    u = url.strip().rstrip("/")
    if u.startswith("http://"):
        u = "ws://" + u[len("http://") :]
    elif u.startswith("https://"):
        u = "wss://" + u[len("https://") :]
    elif not u.startswith(("ws://", "wss://")):
        u = "ws://" + u
    return u if u.endswith("/ws") else u + "/ws"


def parse_frame(raw: Any) -> StepResult:
    """An observation frame as a ``StepResult``; an error frame or anything else raises."""
    if not isinstance(raw, str):
        raise EpisodeError(
            "malformed", f"a binary frame ({len(raw)} bytes) where JSON text was due"
        )
    try:
        msg = json.loads(raw)
    except ValueError:
        raise EpisodeError("malformed", f"not JSON: {raw[:80]!r}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("data"), dict):
        raise EpisodeError("malformed", f"not a {{type, data}} object: {raw[:80]!r}")
    kind, data = msg.get("type"), msg["data"]
    if kind == "error":
        code = str(data.get("code", "UNKNOWN"))
        text = f"{data.get('message', 'no message')} ({code})"
        raise EpisodeError("refused" if code == "CAPACITY_REACHED" else "error", text)
    if kind != "observation":
        raise EpisodeError("malformed", f"frame type {kind!r} where an observation was due")
    obs, reward, done = data.get("observation"), data.get("reward"), data.get("done", False)
    if not isinstance(obs, dict):
        raise EpisodeError("malformed", "an observation frame without an observation object")
    if not isinstance(done, bool):
        raise EpisodeError("malformed", f"done is {done!r}, not true/false")
    if isinstance(reward, bool):
        reward = float(reward)  # openenv allows a bool reward
    if reward is not None and (not isinstance(reward, (int, float)) or not math.isfinite(reward)):
        raise EpisodeError("malformed", f"reward is {reward!r}, not a finite number")
    meta = data.get("metadata") or obs.get("metadata") or {}
    return StepResult(
        observation=obs,
        reward=None if reward is None else float(reward),
        done=done,
        metadata=meta if isinstance(meta, dict) else {},
    )


class OpenEnvSession:
    """``async with OpenEnvSession(url) as s: await s.reset(seed=1); await s.step({...})``."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        message_timeout: float = 60.0,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.url = ws_url(url)
        self.connect_timeout = connect_timeout
        self.message_timeout = message_timeout
        self.max_message_bytes = max_message_bytes
        self._ws: Optional[ClientConnection] = None
        self._rpc_id = 0

    async def __aenter__(self) -> OpenEnvSession:
        try:
            self._ws = await asyncio.wait_for(
                connect(
                    self.url,
                    open_timeout=None,  # the wait_for above bounds the whole opening
                    close_timeout=2,
                    max_size=self.max_message_bytes,
                    proxy=None,
                    ping_interval=None,
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise EpisodeError(
                "timeout", f"no WebSocket handshake from {self.url} in {self.connect_timeout:g}s"
            ) from None
        except InvalidURI as e:
            raise EpisodeError("unreachable", f"{self.url} is not a WebSocket URL ({e})") from None
        except InvalidHandshake as e:
            raise EpisodeError("refused", f"{self.url} refused the WebSocket ({e})") from None
        except OSError as e:
            raise EpisodeError("unreachable", f"{self.url}: {e.strerror or e}") from None
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _exchange(self, message: dict[str, Any], what: str) -> StepResult:
        return parse_frame(await self._roundtrip(message, what))

    async def _roundtrip(self, message: dict[str, Any], what: str) -> Any:
        """Send one frame and return the raw answer (timeouts and closes as ``EpisodeError``)."""
        ws = self._ws
        if ws is None:
            raise RuntimeError("use the session inside `async with`")
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a refused session is an error frame and a close: read the frame if it is there
        try:
            raw = await asyncio.wait_for(ws.recv(), self.message_timeout)
        except asyncio.TimeoutError:
            raise EpisodeError(
                "timeout", f"no answer to {what} in {self.message_timeout:g}s"
            ) from None
        except ConnectionClosed as e:
            raise EpisodeError(
                "closed", f"connection closed before the answer to {what} ({e})"
            ) from None
        return raw

    async def mcp(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One MCP JSON-RPC request (``tools/list``, ``tools/call``) on this session, as openenv's
        ``mcp`` frames carry it; returns the response's ``result`` or ``{"error": {...}}`` (also for a
        server that has no MCP: an error frame, e.g. ``UNKNOWN_TYPE``, becomes such an error)."""
        self._rpc_id += 1
        request = {"jsonrpc": "2.0", "method": method, "params": params, "id": self._rpc_id}
        raw = await self._roundtrip({"type": "mcp", "data": request}, method)
        if not isinstance(raw, str):
            raise EpisodeError("malformed", f"a binary frame ({len(raw)} bytes) for {method}")
        try:
            msg = json.loads(raw)
        except ValueError:
            raise EpisodeError("malformed", f"not JSON: {raw[:80]!r}") from None
        data = msg.get("data") if isinstance(msg, dict) else None
        if not isinstance(data, dict):
            raise EpisodeError("malformed", f"not a {{type, data}} object: {raw[:80]!r}")
        if msg.get("type") == "error":
            code = data.get("code", "UNKNOWN")
            return {"error": {"message": f"{data.get('message', 'no message')} ({code})"}}
        if msg.get("type") != "mcp":
            raise EpisodeError("malformed", f"frame type {msg.get('type')!r} for {method}")
        error = data.get("error")
        if error is not None:
            return {"error": error if isinstance(error, dict) else {"message": str(error)}}
        result = data.get("result")
        return result if isinstance(result, dict) else {"value": result}

    async def reset(self, **data: Any) -> StepResult:
        """Start an episode (``seed``, ``episode_id`` and the env's own reset fields)."""
        return await self._exchange({"type": "reset", "data": data}, "reset")

    async def step(self, action: dict[str, Any]) -> StepResult:
        """Send one action (its fields as the env's action model names them)."""
        return await self._exchange({"type": "step", "data": action}, "step")

    async def close(self) -> None:
        """Say goodbye and wait (briefly) for the server to close, so that its session is gone
        before the next one opens (a server with one slot would refuse it otherwise)."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await asyncio.wait_for(ws.send(json.dumps({"type": "close"})), 2)
            await asyncio.wait_for(ws.wait_closed(), 5)
        except (ConnectionClosed, asyncio.TimeoutError, OSError):
            pass
        finally:
            await ws.close()


__all__ = ["KINDS", "EpisodeError", "OpenEnvSession", "StepResult", "parse_frame", "ws_url"]

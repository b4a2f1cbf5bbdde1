"""The WebSocket ``/ws``: one OpenEnv session per connection, openenv's protocol frame by frame.

The client sends ``reset`` / ``step`` / ``state`` / ``close`` frames and gets ``observation`` /
``state`` / ``error`` frames back, as from an openenv server. A reset starts an episode of the env
(``bridge.BridgedEpisode``) on the item its seed gives (``ServedEnv.item_for``); a step's action
carries the reply in the app's ``action_field``. A frame the client got wrong is answered with
openenv's error frame (``INVALID_JSON``, ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``, ``EXECUTION_ERROR``)
and the session goes on; a rollout that raises is an ``EXECUTION_ERROR`` and ends its episode (the
client resets again). Beyond ``max_sessions`` open sessions a new connection gets
``CAPACITY_REACHED`` and is closed. Each finished episode is one INFO log line.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Optional

from fastapi import APIRouter, Depends, WebSocket, WebSocketDisconnect

from atroposlib.interop.openenv.bridge import BridgedEpisode, EpisodeOver, Frame
from atroposlib.interop.openenv.serve_deps import get_served_env
from atroposlib.interop.openenv.serve_state import ServedEnv
from atroposlib.runtime.failures import one_line

logger = logging.getLogger(__name__)

router = APIRouter()


def error_frame(message: str, code: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


def observation_frame(frame: Frame) -> str:
    return json.dumps({"type": "observation", "data": frame.wire()}, default=str)


class _Session:
    """One connection: its current episode, and the answer to each frame the client sends."""

    def __init__(self, ws: WebSocket, served: ServedEnv) -> None:
        self.ws, self.served = ws, served
        self.episode: Optional[BridgedEpisode] = None

    async def answer_next(self) -> bool:
        """Read and answer one frame; False when the client closed the session. A rollout that
        raised is told to the client and ends the episode."""
        raw = await self.ws.receive_text()
        try:
            return await self._answer(raw)
        except Exception as e:  # noqa: BLE001 - the env's rollout failed: tell the client
            logger.warning("serve-openenv: an episode failed: %s", one_line(e))
            await self.ws.send_text(error_frame(one_line(e), "EXECUTION_ERROR"))
            await self.end_episode()
            return True

    async def _answer(self, raw: str) -> bool:
        try:
            msg = json.loads(raw)
        except ValueError as e:
            await self.ws.send_text(error_frame(f"Invalid JSON: {e}", "INVALID_JSON"))
            return True
        kind = msg.get("type") if isinstance(msg, dict) else None
        data = msg.get("data") if isinstance(msg, dict) else None
        if kind == "close":
            return False
        if kind == "state":
            await self._state()
        elif kind == "reset":
            await self._reset(data)
        elif kind == "step":
            await self._step(data)
        else:
            await self.ws.send_text(error_frame(f"Unknown message type: {kind}", "UNKNOWN_TYPE"))
        return True

    async def _state(self) -> None:
        episode = self.episode
        state = {
            "episode_id": None if episode is None else str(id(episode)),
            "step_count": episode.steps if episode is not None else 0,
        }
        await self.ws.send_text(json.dumps({"type": "state", "data": state}))

    async def _reset(self, data: Any) -> None:
        await self.end_episode()
        seed = data.get("seed") if isinstance(data, dict) else None
        item = await self.served.item_for(seed)
        if item is None:
            await self.ws.send_text(error_frame("the env has no more items", "EXECUTION_ERROR"))
            return
        self.episode = BridgedEpisode(self.served.env, item)
        await self.ws.send_text(observation_frame(await self.episode.start()))

    async def _step(self, data: Any) -> None:
        field = self.served.action_field
        reply = data.get(field) if isinstance(data, dict) else None
        if not isinstance(reply, str):
            message = f"the action needs a string field {field!r}"
            await self.ws.send_text(error_frame(message, "VALIDATION_ERROR"))
            return
        episode = self.episode
        if episode is None:
            await self.ws.send_text(error_frame("send reset before step", "EXECUTION_ERROR"))
            return
        try:
            frame = await episode.step(reply)
        except EpisodeOver as e:
            await self.ws.send_text(error_frame(str(e), "EXECUTION_ERROR"))
            return
        if frame.done:
            logger.info(
                "serve-openenv: episode done: steps=%d reward=%s kept=%s",
                episode.steps,
                frame.reward,
                frame.metadata.get("kept"),
            )
        await self.ws.send_text(observation_frame(frame))

    async def end_episode(self) -> None:
        """Cancel the current episode's rollout, if any."""
        if self.episode is not None:
            await self.episode.cancel()
        self.episode = None


@router.websocket("/ws")
async def session(ws: WebSocket, served: ServedEnv = Depends(get_served_env)) -> None:
    await ws.accept()
    if served.full:
        n, most = len(served.sessions), served.max_sessions
        message = f"Server at capacity ({n}/{most} sessions)"
        await ws.send_text(
            error_frame(message, "CAPACITY_REACHED", active_sessions=n, max_sessions=most)
        )
        await ws.close()
        return
    key = id(ws)
    served.sessions.add(key)
    conn = _Session(ws, served)
    try:
        while await conn.answer_next():
            pass
    except WebSocketDisconnect:
        pass
    finally:
        served.sessions.discard(key)
        await conn.end_episode()
        try:
            await ws.close()
        except RuntimeError:
            pass


__all__ = ["error_frame", "observation_frame", "router"]

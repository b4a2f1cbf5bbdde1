"""An Atropos env served as an OpenEnv environment: openenv's WebSocket protocol on ``/ws``.

Each WebSocket connection is one session with its own episodes (``bridge.BridgedEpisode``): the client
sends ``reset`` / ``step`` / ``state`` / ``close`` frames and gets ``observation`` / ``state`` /
``error`` frames, as from an openenv server. The action's text is the field ``action_field``
(``message``). Beyond ``max_sessions`` open sessions a new connection gets openenv's
``CAPACITY_REACHED`` error frame and is closed. ``GET /health``, ``/metadata`` and ``/schema`` answer
as openenv's do.

``reset`` with an integer ``seed`` pins the item: the first reset with a seed takes the env's next item,
later resets with the same seed (a GRPO group's episodes) get that same item (the last ``SEEDS_KEPT``
seeds are remembered); without a seed every reset takes the next item. Each finished episode is one
INFO log line (``episode done: ...``).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import Any, Optional

from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from atroposlib.interop.openenv.bridge import BridgedEpisode, EpisodeOver, Frame
from atroposlib.runtime.failures import one_line

logger = logging.getLogger(__name__)

SEEDS_KEPT = 4096


def _error(message: str, code: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


def _observation(frame: Frame) -> str:
    return json.dumps({"type": "observation", "data": frame.wire()}, default=str)


def create_openenv_app(env: Any, max_sessions: int = 8, action_field: str = "message") -> FastAPI:
    """The app serving ``env`` (set up already, ``group_size`` 1) to OpenEnv clients."""
    app = FastAPI(title=f"{type(env).__name__} as an OpenEnv environment")
    active: set[int] = set()
    by_seed: OrderedDict[int, Any] = OrderedDict()

    async def item_for(seed: Any) -> Any:
        """The item of a reset: the env's next one, or the one already given to ``seed``."""
        if not isinstance(seed, int) or isinstance(seed, bool):
            return await env.get_next_item()
        if seed in by_seed:
            by_seed.move_to_end(seed)
            return by_seed[seed]
        item = await env.get_next_item()
        if item is not None:
            by_seed[seed] = item
            while len(by_seed) > SEEDS_KEPT:
                by_seed.popitem(last=False)
        return item

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        doc = (type(env).__doc__ or "").strip().splitlines()
        return {
            "name": getattr(env, "name", None) or type(env).__name__,
            "description": doc[0] if doc else "An Atropos environment",
            "version": None,
        }

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        text = {"type": "string"}
        return {
            "action": {
                "type": "object",
                "properties": {action_field: text},
                "required": [action_field],
            },
            "observation": {
                "type": "object",
                "properties": {"prompt": text, "messages": {"type": ["array", "null"]}},
            },
            "state": {
                "type": "object",
                "properties": {"episode_id": text, "step_count": {"type": "integer"}},
            },
        }

    async def answer(ws: WebSocket, episode: Optional[BridgedEpisode], raw: str) -> Any:
        """Handle one frame; returns the session's episode afterwards, or ``False`` to close."""
        try:
            msg = json.loads(raw)
        except ValueError as e:
            await ws.send_text(_error(f"Invalid JSON: {e}", "INVALID_JSON"))
            return episode
        kind = msg.get("type") if isinstance(msg, dict) else None
        data = msg.get("data") if isinstance(msg, dict) else None
        if kind == "close":
            return False
        if kind == "state":
            steps = episode.steps if episode is not None else 0
            state = {
                "episode_id": None if episode is None else str(id(episode)),
                "step_count": steps,
            }
            await ws.send_text(json.dumps({"type": "state", "data": state}))
            return episode
        if kind == "reset":
            if episode is not None:
                await episode.cancel()
            seed = data.get("seed") if isinstance(data, dict) else None
            item = await item_for(seed)
            if item is None:
                await ws.send_text(_error("the env has no more items", "EXECUTION_ERROR"))
                return None
            episode = BridgedEpisode(env, item)
            frame = await episode.start()
        elif kind == "step":
            reply = data.get(action_field) if isinstance(data, dict) else None
            if not isinstance(reply, str):
                await ws.send_text(
                    _error(f"the action needs a string field {action_field!r}", "VALIDATION_ERROR")
                )
                return episode
            if episode is None:
                await ws.send_text(_error("send reset before step", "EXECUTION_ERROR"))
                return episode
            try:
                frame = await episode.step(reply)
            except EpisodeOver as e:
                await ws.send_text(_error(str(e), "EXECUTION_ERROR"))
                return episode
            if frame.done:
                logger.info(
                    "serve-openenv: episode done: steps=%d reward=%s kept=%s",
                    episode.steps,
                    frame.reward,
                    frame.metadata.get("kept"),
                )
        else:
            await ws.send_text(_error(f"Unknown message type: {kind}", "UNKNOWN_TYPE"))
            return episode
        await ws.send_text(_observation(frame))
        return episode

    @app.websocket("/ws")
    async def session(ws: WebSocket) -> None:
        await ws.accept()
        if len(active) >= max_sessions:
            await ws.send_text(
                _error(
                    f"Server at capacity ({len(active)}/{max_sessions} sessions)",
                    "CAPACITY_REACHED",
                    active_sessions=len(active),
                    max_sessions=max_sessions,
                )
            )
            await ws.close()
            return
        key = id(ws)
        active.add(key)
        episode: Optional[BridgedEpisode] = None
        try:
            while True:
                raw = await ws.receive_text()
                try:
                    result = await answer(ws, episode, raw)
                except Exception as e:  # noqa: BLE001 - the env's rollout failed: tell the client
                    logger.warning("serve-openenv: an episode failed: %s", one_line(e))
                    await ws.send_text(_error(one_line(e), "EXECUTION_ERROR"))
                    if episode is not None:
                        await episode.cancel()
                    episode = None
                    continue
                if result is False:
                    break
                episode = result
        except WebSocketDisconnect:
            pass
        finally:
            active.discard(key)
            if episode is not None:
                await episode.cancel()
            try:
                await ws.close()
            except RuntimeError:
                pass

    return app


__all__ = ["create_openenv_app"]

"""The proxy's sessions: what one holds (its managed server, which records every generation, its
tool-call translator, its turn count and limit, and the token ids of every completion as the backend
handled it: what it was sent and what it generated, for a token-exactness check against the nodes)
and the store of the open ones by uuid.

The store is bounded: at most ``max_sessions`` open (one more is refused, after idle ones are
expired), and a session unused for ``idle_timeout`` seconds is closed (its nodes with it) and
counted in ``expired``. Expiry runs when sessions are opened, listed or looked up, at most once a
second; a request for an expired session is a 404 that says so (the last ``REMEMBERED`` expired ids
are remembered for that).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator

logger = logging.getLogger(__name__)

REMEMBERED = 10_000
"""Expired session ids kept to tell a late request that its session expired (not that it never was)."""
SWEEP_INTERVAL_S = 1.0


@dataclass
class SessionState:
    uuid: str
    managed_server: Any
    translator: ToolCallTranslator
    model_name: str
    base_url: Optional[str] = None
    created_at: float = field(default_factory=time.time)
    last_accessed: float = field(default_factory=time.time)
    max_turns: Optional[int] = None
    turns: int = 0  # chat completions served
    turn_limit_hit: bool = False  # a completion was refused because max_turns were served
    # per completion the client received: {"prompt_token_ids": [...], "token_ids": [[...] per
    # choice], "temperature": what it was sampled at}
    completions: list[dict[str, Any]] = field(default_factory=list)

    def recorded_nodes(self) -> list[Any]:
        """The sequence nodes its managed server recorded (the current nodes, or every sequence
        of the tree when the session tracks one)."""
        state = self.managed_server.get_state()
        found: list[Any] = state.get("nodes") or list((state.get("sequences") or {}).values())
        return found

    def summary(self) -> dict[str, Any]:
        """Its row in ``GET /sessions``."""
        return {
            "uuid": self.uuid,
            "model_name": self.model_name,
            "base_url": self.base_url,
            "created_at": self.created_at,
            "last_accessed": self.last_accessed,
            "num_nodes": len(self.recorded_nodes()),
            "turns": self.turns,
            "max_turns": self.max_turns,
            "turn_limit_hit": self.turn_limit_hit,
        }


class SessionStore:
    """The open sessions by uuid, in the order they were opened (see the module docstring)."""

    def __init__(self, max_sessions: int = 1024, idle_timeout: float = 1800.0) -> None:
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.expired = 0
        self._sessions: dict[str, SessionState] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._last_sweep = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[SessionState]:
        self.expire_idle()
        return iter(list(self._sessions.values()))

    @property
    def full(self) -> bool:
        """Whether no session can be opened now (after expiring the idle ones)."""
        self.expire_idle(force=True)
        return len(self._sessions) >= self.max_sessions

    def add(self, session: SessionState) -> None:
        self._sessions[session.uuid] = session

    def touch(self, session_uuid: str) -> Optional[SessionState]:
        """The open session ``session_uuid`` with its last access set to now; None if none is."""
        self.expire_idle()
        session = self._sessions.get(session_uuid)
        if session is not None:
            session.last_accessed = time.time()
        return session

    def expired_recently(self, session_uuid: str) -> bool:
        """Whether ``session_uuid`` was closed for idling (among the last ``REMEMBERED``)."""
        return session_uuid in self._gone

    def remove(self, session_uuid: str) -> None:
        del self._sessions[session_uuid]

    def expire_idle(self, now: Optional[float] = None, force: bool = False) -> int:
        """Close the sessions idle longer than ``idle_timeout``; how many were closed."""
        now = time.time() if now is None else now
        if not force and now - self._last_sweep < SWEEP_INTERVAL_S:
            return 0
        self._last_sweep = now
        idle = [u for u, s in self._sessions.items() if now - s.last_accessed > self.idle_timeout]
        for session_uuid in idle:
            del self._sessions[session_uuid]
            self._gone[session_uuid] = None
        while len(self._gone) > REMEMBERED:
            self._gone.popitem(last=False)
        if idle:
            self.expired += len(idle)
            logger.info(
                "proxy: closed %d session(s) idle for more than %.0f s (%d expired in all, %d open)",
                len(idle),
                self.idle_timeout,
                self.expired,
                len(self._sessions),
            )
        return len(idle)


__all__ = ["REMEMBERED", "SessionState", "SessionStore"]

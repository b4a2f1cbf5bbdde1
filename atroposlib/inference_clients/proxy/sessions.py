"""The proxy's sessions: what one holds (its managed server, which records every generation, and
its tool-call translator) and the store of the open ones by uuid."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator


@dataclass
class SessionState:
    uuid: str
    managed_server: Any
    translator: ToolCallTranslator
    model_name: str
    base_url: Optional[str] = None
    created_at: float = field(default_factory=time.time)
    last_accessed: float = field(default_factory=time.time)

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
        }


class SessionStore:
    """The open sessions by uuid, in the order they were opened."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[SessionState]:
        return iter(list(self._sessions.values()))

    def add(self, session: SessionState) -> None:
        self._sessions[session.uuid] = session

    def touch(self, session_uuid: str) -> Optional[SessionState]:
        """The open session ``session_uuid`` with its last access set to now; None if none is."""
        session = self._sessions.get(session_uuid)
        if session is not None:
            session.last_accessed = time.time()
        return session

    def remove(self, session_uuid: str) -> None:
        del self._sessions[session_uuid]


__all__ = ["SessionState", "SessionStore"]

"""``ProxyState``: what the proxy's routes share (the server manager, the tokenizer, the served model
name, the session store), with the two look-ups that answer 404: a session, a server by url."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import HTTPException

from atroposlib.inference_clients.proxy.servers import least_busy, server_at
from atroposlib.inference_clients.proxy.sessions import SessionState, SessionStore
from atroposlib.inference_clients.server_manager import ServerManager


@dataclass
class ProxyState:
    server_manager: ServerManager
    tokenizer: Any
    model_name: str
    sessions: SessionStore = field(default_factory=SessionStore)

    def session(self, session_uuid: str) -> SessionState:
        """The open session ``session_uuid`` (its last access set to now); 404 when none is."""
        session = self.sessions.touch(session_uuid)
        if session is None:
            raise HTTPException(404, f"Session {session_uuid} not found")
        return session

    def pick_server(self, base_url: Optional[str]) -> Any:
        """The server a new session runs on: the one at ``base_url`` (404 when no server is), else
        the least busy healthy one."""
        servers = self.server_manager.servers
        if base_url is None:
            return least_busy(servers)
        server = server_at(servers, base_url)
        if server is None:
            urls = [s.config.base_url for s in servers]
            raise HTTPException(404, f"No server with base_url '{base_url}'. Available: {urls}")
        return server


__all__ = ["ProxyState"]

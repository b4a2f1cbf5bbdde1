"""``ProxyState``: what the proxy's routes share (the server manager, the tokenizer, the served model
name, the settings, the session store, the counts), with the look-ups that answer 404: a session, a
server by url.

The counts (``GET /health``'s ``counts``): ``refused`` (requests answered 4xx for what they asked,
by field), ``undelivered`` (generations whose client was gone before it had the whole answer: their
nodes were taken back, never trained), ``tool_choice_unmet`` (a reply that called no tool although
``tool_choice`` asked for one, or called several with ``parallel_tool_calls`` false: generation
cannot be constrained, so it is counted), ``backend_errors`` (the backend failed or refused), and
from the sessions' managed servers ``token_drifts`` (re-rendering a conversation would have changed
the tokens the model saw; the exact ones are kept) and ``history_edits`` (a client replayed an
assistant turn other than the one the model wrote, e.g. as text: that turn starts a new node).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import HTTPException

from atroposlib.inference_clients.proxy.servers import least_busy, server_at
from atroposlib.inference_clients.proxy.sessions import SessionState, SessionStore
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.inference_clients.server_manager import ServerManager

logger = logging.getLogger(__name__)


@dataclass
class ProxyState:
    server_manager: ServerManager
    tokenizer: Any
    model_name: str
    settings: ProxySettings = field(default_factory=ProxySettings)
    max_model_len: Optional[int] = None  # the backend's context length, where it says it
    sessions: SessionStore = field(init=False)
    counts: Counter[str] = field(default_factory=Counter)
    _logged: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self.sessions = SessionStore(self.settings.max_sessions, self.settings.session_idle_timeout)

    def session(self, session_uuid: str) -> SessionState:
        """The open session ``session_uuid`` (its last access set to now); 404 when none is."""
        session = self.sessions.touch(session_uuid)
        if session is None:
            why = (
                f" (closed after {self.settings.session_idle_timeout:g} s idle)"
                if self.sessions.expired_recently(session_uuid)
                else ""
            )
            raise HTTPException(404, f"Session {session_uuid} not found{why}")
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

    def count(self, kind: str, detail: str = "") -> None:
        """Count one event of ``kind``; the first of each kind is logged at WARNING."""
        self.counts[kind] += 1
        if kind not in self._logged:
            self._logged.add(kind)
            logger.warning(
                "proxy: %s%s (further ones are counted in /health, not logged)",
                kind.replace("_", " "),
                f": {detail}" if detail else "",
            )

    def summary_counts(self) -> dict[str, Any]:
        """``/health``'s ``counts``."""
        refused = {
            k.split(":", 1)[1]: v for k, v in self.counts.items() if k.startswith("refused:")
        }
        return {
            "sessions_expired": self.sessions.expired,
            "refused": refused,
            "undelivered": self.counts["undelivered"],
            "tool_choice_unmet": self.counts["tool_choice_unmet"],
            "backend_errors": self.counts["backend_errors"],
            "token_drifts": self.server_manager.managed_stats.drift_total,
            "history_edits": self.server_manager.managed_stats.history_edits,
        }


__all__ = ["ProxyState"]

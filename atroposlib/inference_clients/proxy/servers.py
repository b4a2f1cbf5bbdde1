"""The backend servers behind the proxy: which one a new session runs on (the one at its
``base_url``, else the healthy one with the most free slots) and the managed server that records the
session's generations there (token-exact where the backend gives tokens, text-only otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.inference_clients.managed_server import DummyManagedServer, ManagedServer
from atroposlib.inference_clients.server_manager import ServerManager


def free_slots(server: Any) -> int:
    """How many more requests ``server`` takes now (its semaphore's count)."""
    sem = server.sem
    return sem.available() if hasattr(sem, "available") else int(getattr(sem, "_value", 0))


def server_at(servers: Sequence[Any], base_url: str) -> Optional[Any]:
    """The server whose ``base_url`` is ``base_url`` (trailing slashes ignored), None if none is."""
    for server in servers:
        if (server.config.base_url or "").rstrip("/") == base_url.rstrip("/"):
            return server
    return None


def least_busy(servers: Sequence[Any]) -> Any:
    """The healthy server (any, when none is healthy) with the most free slots."""
    healthy = [s for s in servers if getattr(s, "server_healthy", True)] or servers
    return max(healthy, key=free_slots)


def open_managed(server: Any, tokenizer: Any, manager: ServerManager, track_tree: bool) -> Any:
    """A new managed server on ``server``, counting into ``manager``'s managed stats."""
    if getattr(server, "supports_tokens", False):
        return ManagedServer(
            server,
            tokenizer,
            track_tree=track_tree,
            on_token_drift=manager.on_token_drift,
            stats=manager.managed_stats,
        )
    return DummyManagedServer(server, tokenizer, stats=manager.managed_stats)


__all__ = ["free_slots", "least_busy", "open_managed", "server_at"]

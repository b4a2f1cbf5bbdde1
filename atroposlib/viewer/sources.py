"""Where ``view-run`` reads groups from: a live trajectory API (read-only) or a JSONL file.

``ApiSource`` only calls ``GET /peek`` (and ``/status``): it never registers, pulls ``/batch``, acks
or resets, so it is safe to point at a live training run. ``FileSource`` re-reads a groups JSONL
(written by ``serve``/``process``) on every fetch, so a growing file shows new groups on refresh.
Both return plain group dicts carrying ``seq``, ``env_name`` and, from the API, ``state``.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Optional, Protocol

from atroposlib.api.client import TrajectoryClient
from atroposlib.report.groups import LoadStats, iter_groups_jsonl


class GroupSource(Protocol):
    """Something ``view-run`` can fetch recent groups from."""

    description: str

    def fetch(self, limit: int, env: Optional[str] = None) -> list[dict[str, Any]]:
        """The newest ``limit`` groups (optionally of one env), oldest first."""
        ...

    def status_line(self) -> str:
        """One line about the source (queue size, step, file size...)."""
        ...


class ApiSource:
    """Reads a running API with ``GET /peek``; honours ``--api-token``."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 15.0) -> None:
        self.url = url.rstrip("/")
        self.client = TrajectoryClient(
            self.url, token=token, timeout=timeout, retries=2, retry_max_seconds=10.0
        )
        self.description = f"API {self.url} (read-only: GET /peek)"

    def fetch(self, limit: int, env: Optional[str] = None) -> list[dict[str, Any]]:
        resp = self.client.peek(limit=max(1, min(limit, 1000)), env=env or None)
        out = []
        for rec in resp.groups:
            g = dict(rec.group)
            g["seq"] = rec.seq
            g["state"] = rec.state
            g["received_at"] = rec.received_at
            if rec.env_name is not None:
                g["env_name"] = rec.env_name
            out.append(g)
        return out

    def status_line(self) -> str:
        st = self.client.status()
        return f"step {st.current_step}, queue {st.queue_size} groups"

    def close(self) -> None:
        self.client.close()


class FileSource:
    """Reads a groups JSONL file (re-read on every fetch)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"--file not found: {self.path}")
        self.description = f"file {self.path}"
        self.last_stats = LoadStats()

    def fetch(self, limit: int, env: Optional[str] = None) -> list[dict[str, Any]]:
        stats = LoadStats()
        recent: deque = deque(maxlen=max(1, limit))
        for i, g in enumerate(iter_groups_jsonl(self.path, stats)):
            g.setdefault("seq", i + 1)  # 1-based, like the API's ingest sequence
            if env and str(g.get("env_name", g.get("env_id", ""))) != env:
                continue
            recent.append(g)
        self.last_stats = stats
        return list(recent)

    def status_line(self) -> str:
        skipped = sum(self.last_stats.skipped.values())
        note = f", {skipped} unreadable lines skipped" if skipped else ""
        return f"{self.last_stats.groups} groups in file{note}"

    def close(self) -> None:
        """Nothing to release."""


__all__ = ["ApiSource", "FileSource", "GroupSource"]

"""Memory never runs ahead of disk in a real ``run-api`` (SQLite store): when a commit fails, the
request is a 500 and the run in memory is what the store holds (rebuilt from it, as a restart would
load it), so the answers before and after a restart agree. The commit is made to fail the way it
can in the field: another process (an ``sqlite3`` shell, a backup) holds the database's write lock
past the server's busy timeout.

The 500 itself is a server fault handled like any answer: ``ErrorResponse`` JSON, logged once with
one traceback, and the client's keep-alive connection stays usable.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson

from tests.api.api_helpers import group, registration
from tests.live_servers import LiveServer, run_api_server


@contextmanager
def write_locked(data_dir: Path) -> Iterator[None]:
    """Hold the store's write lock from this (other) process."""
    db = sqlite3.connect(data_dir / "trajectories.sqlite3", isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def _request(conn: http.client.HTTPConnection, method: str, path: str, body: object = None):
    data = None if body is None else orjson.dumps(body)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.getheader("connection"), json.loads(r.read() or b"null")


def test_a_failed_commit_changes_nothing_in_memory_and_keeps_the_connection(tmp_path: Path):
    data_dir = tmp_path / "data"
    api: LiveServer = run_api_server(data_dir, "--store", "sqlite").start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=60)
        with write_locked(data_dir):
            status, connection, body = _request(
                conn, "POST", "/register", registration(batch_size=2)
            )
        assert status == 500 and body["error"].startswith("internal error"), body
        sock = conn.sock
        assert sock is not None and connection != "close"
        # the same connection, the next request: answered (not reset), and nothing was registered
        assert _request(conn, "GET", "/status")[2]["registered"] is False
        assert conn.sock is sock
        assert _request(conn, "GET", "/wandb_info")[2] == {"group": None, "project": None}
        log = api.log()
        assert log.count("Traceback") == 1, log[-4000:]

        # an ack whose commit fails leaves the batch outstanding: delivered again, never dropped
        assert _request(conn, "POST", "/register", registration(batch_size=2))[0] == 200
        assert _request(conn, "POST", "/scored_data", group(2, group_id="g1"))[0] == 200
        _, _, batch = _request(conn, "GET", "/batch")
        with write_locked(data_dir):
            assert _request(conn, "POST", "/batch/ack", {"batch_id": batch["batch_id"]})[0] == 500
        conn.close()
        with httpx.Client(base_url=api.url, timeout=30) as h:
            again = h.get("/batch", headers={"X-Atropos-Ack": "explicit"}).json()
            assert again["batch_id"] == batch["batch_id"] and again["step"] == batch["step"]
            assert [g["group_id"] for g in again["batch"]] == ["g1"]
    finally:
        api.stop()

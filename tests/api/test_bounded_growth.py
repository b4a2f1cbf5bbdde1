"""A long run stays bounded: rows and group_ids of acknowledged groups older than the dedup
window are deleted (on disk and in memory), while recent retries are still recognised."""

from __future__ import annotations

import sqlite3

from api_helpers import group, registration


def _rows(data_dir) -> int:
    db = sqlite3.connect(data_dir / "trajectories.sqlite3")
    try:
        return db.execute("SELECT COUNT(*) FROM groups").fetchone()[0]
    finally:
        db.close()


def test_old_acknowledged_groups_are_forgotten_recent_ids_still_deduplicated(make_client, tmp_path):
    c = make_client(dedup_window=20, history_size=5)
    c.post("/register", json=registration(batch_size=2))
    c.get("/batch")
    for i in range(100):
        assert c.post("/scored_data", json=group(2, seed=i, group_id=f"g{i}")).status_code == 200
        b = c.get("/batch").json()
        c.post("/batch/ack", json={"batch_id": b["batch_id"]})
    svc = c.app.state.service
    assert len(svc.group_ids) <= 20 + 8, len(svc.group_ids)  # pruned every 8 acks
    assert _rows(tmp_path / "data") <= 20 + 8
    assert "g99" in svc.group_ids and "g0" not in svc.group_ids
    # a recent retry is still a duplicate
    assert c.post("/scored_data", json=group(2, seed=99, group_id="g99")).json()["duplicate"]
    c.__exit__(None, None, None)
    d = make_client(dedup_window=20, history_size=5)  # restart: loads only what is left
    assert len(d.app.state.service.group_ids) <= 20 + 8
    assert d.post("/scored_data", json=group(2, seed=98, group_id="g98")).json()["duplicate"]
    assert d.get("/status").json()["current_step"] == 100


def test_memory_store_forgets_too(make_client):
    c = make_client(store="memory", dedup_window=10, history_size=2)
    c.post("/register", json=registration(batch_size=2))
    c.get("/batch")
    for i in range(50):
        c.post("/scored_data", json=group(2, seed=i, group_id=f"m{i}"))
        b = c.get("/batch").json()
        c.post("/batch/ack", json={"batch_id": b["batch_id"]})
    store = c.app.state.service.store
    assert len(store._rows) <= 10 + 8 and len(c.app.state.service.group_ids) <= 10 + 8

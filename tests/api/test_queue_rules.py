"""Ack/redelivery, restart recovery, idempotency, backpressure, staleness, mixed sizes, min allocation."""

from __future__ import annotations

import json

from api_helpers import env_registration, group, registration


def _start(client, batch_size=4, **reg):
    client.post("/register", json=registration(batch_size=batch_size, **reg))
    client.get("/batch")


def test_explicit_ack_and_redelivery_after_trainer_reregisters(client):
    _start(client)
    for i in range(4):
        client.post("/scored_data", json=group(2, seed=i))
    b1 = client.get("/batch").json()
    assert b1["step"] == 1
    # trainer restarts: a new /register puts the unacked batch back, same id and step
    client.post("/register", json=registration(batch_size=4))
    again = client.get("/batch").json()
    assert again == b1
    assert client.get("/status").json()["current_step"] == 1  # redelivery does not advance the step
    assert client.post("/batch/ack", json={"batch_id": b1["batch_id"]}).json()["status"] == "acked"
    # acking twice is fine, an unknown id is a 404
    assert (
        client.post("/batch/ack", json={"batch_id": b1["batch_id"]}).json()["already_acked"] is True
    )
    r = client.post("/batch/ack", json={"batch_id": "nope"})
    assert r.status_code == 404 and "nope" in r.json()["error"]
    b2 = client.get("/batch").json()
    assert b2["step"] == 2 and b2["batch_id"] != b1["batch_id"]
    seen = [g["tokens"] for g in b1["batch"] + b2["batch"]]
    assert len(seen) == 4 and all(seen.count(t) == 1 for t in seen)


def test_restart_restores_registration_envs_step_queue_buffers_and_pending(make_client, tmp_path):
    c = make_client()
    c.post("/register", json=registration(batch_size=4, starting_step=7))
    c.get("/batch")
    c.post("/register-env", json=env_registration("arith", group_size=4))
    for i in range(3):
        c.post("/scored_data", json=group(4, env_id=0, seed=i))
    assert c.post("/scored_data", json=group(1, env_id=0, seed=9)).json() == {
        "status": "buffered",
        "buffer_size": 1,
    }
    pending = c.get("/batch").json()
    assert pending["step"] == 8
    c.__exit__(None, None, None)

    d = make_client()  # same data dir, fresh process state
    assert d.get("/info").json() == {"batch_size": 4, "max_token_len": 64}
    status = d.get("/status").json()
    assert (
        status["current_step"] == 8
        and status["queue_size"] == 2
        and status["buffered_sequences"] == 1
    )
    env = d.post("/register-env", json=env_registration("arith", group_size=4)).json()
    assert env["wandb_name"] == "arith_1"  # the first env came back
    redelivered = d.get("/batch").json()
    assert redelivered == pending
    nxt = d.get("/batch").json()  # implicit ack of the redelivered batch
    assert nxt["step"] == 9 and nxt["batch"][0]["tokens"] != pending["batch"][0]["tokens"]
    # completing the buffer releases the three small groups (1+1+2 = 4)
    d.post("/scored_data", json=group(1, env_id=0, seed=10))
    d.post("/scored_data", json=group(2, env_id=0, seed=11))
    assert d.get("/status").json()["buffered_sequences"] == 0


def test_idempotent_ingest_by_group_id(client):
    _start(client)
    g = group(2, group_id="g-1")
    assert client.post("/scored_data", json=g).json() == {"status": "received"}
    dup = client.post("/scored_data", json=g).json()
    assert dup["status"] == "received" and dup["duplicate"] is True
    r = client.post(
        "/scored_data_list",
        json=[group(2, seed=3, group_id="g-2"), group(2, seed=4, group_id="g-2"), g],
    )
    assert r.json() == {"status": "received", "groups_processed": 3, "duplicates": 2}
    assert client.get("/status").json()["queue_size"] == 2
    assert "atropos_duplicate_groups_total 3.0" in client.get("/metrics").text


def test_backpressure_503_with_retry_after(make_client):
    c = make_client(store="memory", max_queued_sequences=6, retry_after_seconds=2)
    for i in range(3):
        assert c.post("/scored_data", json=group(2, seed=i)).status_code == 200
    r = c.post("/scored_data", json=group(2, seed=5))
    assert r.status_code == 503 and r.headers["Retry-After"] == "2"
    assert "limits 6" in r.json()["error"]
    c.post("/register", json=registration(batch_size=4))
    c.get("/batch")
    assert c.post("/scored_data", json=group(2, seed=5)).status_code == 200


def test_staleness_drops_are_counted_by_env_and_length(make_client):
    c = make_client(max_staleness=1)
    _start(c, batch_size=2, starting_step=5)
    c.post("/register-env", json=env_registration("arith", group_size=2))
    c.post(
        "/scored_data", json=group(2, env_id=0, policy_version=1, length=300)
    )  # 5 - 1 > 1: stale
    c.post("/scored_data", json=group(2, env_id=0, policy_version=4, seed=2))
    c.post("/scored_data", json=group(2, seed=3))  # no version: never stale
    b = c.get("/batch").json()
    assert [g.get("policy_version") for g in b["batch"]] == [4]
    status = c.get("/status").json()
    assert status["stale_dropped_by_env"] == {"arith_0": 1}
    assert status["stale_dropped_by_length"] == {"<=512": 1}
    assert status["queued_by_env"]["None"]["sequences"] == 2  # the unversioned group waits
    assert status["queued_by_env"]["None"]["oldest_wait_s"] >= 0
    assert status["queued_by_length"] == {"<=256": 1}
    assert (
        'atropos_stale_dropped_groups_total{env="arith_0",length_bucket="<=512"} 1.0'
        in c.get("/metrics").text
    )
    assert c.get("/batch").json()["batch"][0].get("policy_version") is None


def test_envs_are_told_how_many_batches_keep_them_within_the_staleness_bound(make_client):
    """A group started when its env holds b batches is trained b steps later on weights up to
    weights_lag steps older: envs may hold max_staleness - weights_lag batches (at least 1)."""
    for settings, lag, expected in (
        ({}, 2, 2),  # the default bound 4, a trainer refreshing every 3 steps
        ({}, None, 3),  # a trainer that does not say (Atropos's): 1 step assumed
        ({"max_staleness": 2}, 5, 1),  # never below one batch (the trainer warns)
        ({"max_staleness": None}, 2, None),  # no bound: no limit from the API
    ):
        c = make_client(store="memory", **settings)
        _start(c, weights_lag=lag)
        c.post("/register-env", json=env_registration("a"))
        st = c.request("GET", "/status-env", json={"env_id": 0}).json()
        assert st["max_batches_offpolicy"] == expected, (settings, lag, st)
        assert st["max_staleness"] == settings.get("max_staleness", 4)
        assert c.get("/status").json()["max_staleness"] == settings.get("max_staleness", 4)


def test_mixed_group_sizes_buffer_release_and_big_groups(client):
    _start(client, batch_size=8)
    client.post("/register-env", json=env_registration("e", group_size=4))
    assert client.post("/scored_data", json=group(3, env_id=0)).json() == {
        "status": "buffered",
        "buffer_size": 3,
    }
    assert client.post("/scored_data", json=group(2, env_id=0, seed=1)).json()["buffer_size"] == 5
    r = client.post("/scored_data", json=group(1, env_id=0, seed=2)).json()
    assert r == {"status": "buffered", "buffer_size": 2}  # 3+1 released, the 2 waits
    # a group larger than the env's group size is queued whole, never buffered forever
    assert client.post("/scored_data", json=group(6, env_id=0, seed=3)).json() == {
        "status": "received"
    }
    assert client.post("/scored_data", json=group(2, env_id=0, seed=5)).json() == {
        "status": "buffered",
        "buffer_size": 0,
    }
    # queue-entry order: 3, 1 (released together), 6, 2, 2 (released together) -> 3+1+2+2
    b = client.get("/batch").json()
    assert [len(g["tokens"]) for g in b["batch"]] == [3, 1, 2, 2]
    assert client.get("/status").json()["queued_sequences"] == 6
    # a group larger than batch_size could never be delivered: refused up front
    r = client.post("/scored_data", json=group(9, seed=4))
    assert r.status_code == 422 and "batch_size is 8" in r.json()["error"]


def test_buffer_without_exact_combination_is_released_not_stuck(client):
    _start(client, batch_size=9)
    client.post("/register-env", json=env_registration("e", group_size=8))
    for i in range(5):
        client.post("/scored_data", json=group(3, env_id=0, seed=i))
    assert client.get("/status").json()["buffered_sequences"] == 15
    # 3s never sum to 8; at >= 16 buffered sequences the buffer is released as it is
    client.post("/scored_data", json=group(3, env_id=0, seed=9))
    status = client.get("/status").json()
    assert status["buffered_sequences"] == 0 and status["queued_sequences"] == 18
    assert sum(len(g["tokens"]) for g in client.get("/batch").json()["batch"]) == 9


def test_min_batch_allocation_through_the_api(client):
    _start(client, batch_size=8)
    client.post("/register-env", json=env_registration("fast", group_size=2))
    client.post(
        "/register-env", json=env_registration("slow", group_size=2, min_batch_allocation=0.5)
    )
    for i in range(6):
        client.post("/scored_data", json=group(2, env_id=0, seed=i))
    assert client.get("/batch").json()["batch"] is None  # slow env cannot fill its half yet
    assert "env 1" in client.get("/status").json()["blocked_by"]
    client.post("/scored_data", json=group(2, env_id=1, seed=20))
    client.post("/scored_data", json=group(2, env_id=1, seed=21))
    # /status says what the next /batch would meet, not what the last one did
    assert client.get("/status").json()["blocked_by"] is None
    b = client.get("/batch").json()["batch"]
    assert sum(len(g["tokens"]) for g in b if g["env_id"] == 1) >= 4
    assert sum(len(g["tokens"]) for g in b) == 8


def test_shares_by_weight_are_guaranteed_told_to_envs_and_counted_per_env(make_client):
    """run-api --batch-shares weight: envs without a min_batch_allocation split what is left by
    weight; each env is told its share; /status and /metrics count each env's groups."""
    c = make_client(store="memory", batch_shares="weight")
    _start(c, batch_size=8)
    c.post("/register-env", json=env_registration("fast", group_size=2, weight=1.0))
    c.post("/register-env", json=env_registration("slow", group_size=2, weight=1.0))
    c.post("/register-env", json=env_registration("off", group_size=2, weight=0.0))
    shares = [
        c.request("GET", "/status-env", json={"env_id": i}).json()["batch_share"] for i in range(3)
    ]
    assert shares == [0.5, 0.5, None]  # weight 0: no guaranteed share
    for i in range(6):  # the fast env is far ahead
        c.post("/scored_data", json=group(2, env_id=0, seed=i))
    assert c.get("/batch").json()["batch"] is None  # the slow env's half is missing
    for i in range(2):
        c.post("/scored_data", json=group(2, env_id=1, seed=10 + i))
    b = c.get("/batch").json()["batch"]
    assert [g["env_id"] for g in b].count(1) == 2 and len(b) == 4  # 4 + 4 sequences
    by_env = c.get("/status").json()["groups_by_env"]
    assert by_env["fast_0"] == {"received": 6, "delivered": 2, "stale_dropped": 0}
    assert by_env["slow_0"] == {"received": 2, "delivered": 2, "stale_dropped": 0}
    assert 'atropos_env_groups_delivered_total{env="slow_0"} 2.0' in c.get("/metrics").text


def test_shares_adding_up_to_more_than_1_are_a_precise_422(client):
    _start(client, batch_size=8)
    ok = client.post("/register-env", json=env_registration("a", min_batch_allocation=0.7))
    assert ok.json()["status"] == "success"
    r = client.post("/register-env", json=env_registration("b", min_batch_allocation=0.4))
    assert r.status_code == 422
    assert "add up to 1.1 (> 1; 0.7 is taken)" in r.json()["error"]
    assert client.post("/disconnect-env", json={"env_id": 0}).json()["status"] == "success"
    again = client.post("/register-env", json=env_registration("b", min_batch_allocation=0.4))
    assert again.json()["env_id"] == 1  # the refused one took no id


def test_validation_errors_name_field_and_index(client):
    bad = group(2)
    bad["masks"][1] = bad["masks"][1][:-1]
    r = client.post("/scored_data", json=bad)
    assert (
        r.status_code == 422
        and "masks[1] has 5 values but tokens[1] has 6 tokens" in r.json()["error"]
    )
    r = client.post("/scored_data", json=group(2) | {"scores": [1.0]})
    assert r.status_code == 422 and "scores has 1 entries" in r.json()["error"]
    r = client.post("/scored_data_list", json=[group(2), group(2) | {"tokens": [[1, "x"], [2]]}])
    assert r.status_code == 422 and "[1].tokens[0][1]" in r.json()["error"]
    assert client.get("/status").json()["queue_size"] == 0  # a bad list commits nothing
    nan_body = json.dumps(group(2) | {"scores": [float("nan"), 1.0]})
    r = client.post("/scored_data", content=nan_body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "scores[0]" in r.json()["error"]
    r = client.post(
        "/scored_data", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422 and "not valid JSON" in r.json()["error"]
    r = client.post("/register", json={"batch_size": 0, "max_token_len": 5})
    assert r.status_code == 422 and "batch_size" in r.json()["error"]
    assert client.get("/peek?limit=0").status_code == 422


def test_lax_values_are_normalized_and_extra_keys_kept(client):
    _start(client, batch_size=2)
    g = group(2) | {
        "custom": {"k": "v"},
        "messages": [[{"role": "tool", "content": "ünïcødé ✓"}]] * 2,
    }
    g["tokens"][0][0] = 7.0  # Atropos (lax pydantic) accepts an integral float as a token id
    assert client.post("/scored_data", json=g).status_code == 200
    out = client.get("/batch").json()["batch"][0]
    assert out["tokens"][0][0] == 7 and isinstance(out["tokens"][0][0], int)
    assert out["custom"] == {"k": "v"} and out["messages"][0][0]["content"] == "ünïcødé ✓"


def test_unreadable_payload_is_dropped_and_counted_not_a_stuck_batch(make_client, tmp_path):
    c = make_client(store="sqlite")
    _start(c, batch_size=4)
    for i in range(3):
        c.post("/scored_data", json=group(2, seed=i, group_id=f"g{i}"))
    seg = next((tmp_path / "data" / "blobs").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[5] ^= 0xFF  # inside the first group's payload
    seg.write_bytes(bytes(data))
    b = c.get("/batch").json()
    assert [g["group_id"] for g in b["batch"]] == ["g1", "g2"]
    assert "atropos_corrupt_payloads_total 1.0" in c.get("/metrics").text


def test_disconnect_releases_the_envs_buffer(client):
    _start(client, batch_size=4)
    client.post("/register-env", json=env_registration("e", group_size=4))
    client.post("/scored_data", json=group(3, env_id=0))
    assert client.get("/status").json()["buffered_sequences"] == 3
    client.post("/disconnect-env", json={"env_id": 0})
    status = client.get("/status").json()
    assert status["buffered_sequences"] == 0 and status["queued_sequences"] == 3


def test_backpressure_also_bounds_bytes(make_client):
    c = make_client(store="memory", max_queued_bytes=3000)
    assert c.post("/scored_data", json=group(2, length=40)).status_code == 200
    assert c.post("/scored_data", json=group(2, length=40, seed=1)).status_code == 503
    assert c.post("/scored_data", json=group(1, length=2, seed=2)).status_code == 200

"""gzip in/out, size limits and gzip bombs, auth, CORS, peek, metrics (in-process app)."""

from __future__ import annotations

import gzip
import inspect

import orjson
import pytest
from api_helpers import group, registration
from fastapi import params

from atroposlib.api import app as app_module
from atroposlib.api.routes import admin, batches, ingest, status
from atroposlib.api.routes import registration as registration_routes

TOKEN = "s3cret-token"


def test_gzip_request_body_accepted_and_large_response_gzipped(make_client):
    c = make_client(store="memory", gzip_min_bytes=1000)
    body = gzip.compress(orjson.dumps(group(2, length=200)))
    r = c.post(
        "/scored_data",
        content=body,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert r.json() == {"status": "received"}
    c.post("/register", json=registration(batch_size=2))
    r = c.get("/batch", headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"
    assert len(r.json()["batch"][0]["tokens"][0]) == 200  # httpx decodes it
    r = c.get("/latest_example", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in r.headers


def test_corrupt_gzip_is_400(make_client):
    c = make_client(store="memory")
    r = c.post("/scored_data", content=b"\x1f\x8bnot-really", headers={"Content-Encoding": "gzip"})
    assert r.status_code == 400 and "gzip" in r.json()["error"]


def test_body_limit_413(make_client):
    c = make_client(store="memory", max_body_bytes=2000)
    r = c.post("/scored_data", json=group(4, length=300))
    assert r.status_code == 413 and "2000" in r.json()["error"]
    assert c.post("/scored_data", json=group(1, length=5)).status_code == 200


def test_gzip_bomb_is_refused_without_inflating_it(make_client):
    c = make_client(store="memory", max_decompressed_bytes=1_000_000)
    bomb = gzip.compress(b"[" + b" " * 20_000_000 + b"]", compresslevel=9)
    assert len(bomb) < 100_000
    r = c.post("/scored_data", content=bomb, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 413 and "decompressed" in r.json()["error"]


def test_unknown_content_encoding_is_415(make_client):
    c = make_client(store="memory")
    r = c.post("/scored_data", content=b"{}", headers={"Content-Encoding": "br"})
    assert r.status_code == 415


@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/register"),
        ("post", "/register-env"),
        ("post", "/disconnect-env"),
        ("get", "/wandb_info"),
        ("get", "/info"),
        ("get", "/batch"),
        ("post", "/batch/ack"),
        ("get", "/latest_example"),
        ("post", "/scored_data"),
        ("post", "/scored_data_list"),
        ("get", "/status"),
        ("get", "/status-env"),
        ("get", "/peek"),
        ("get", "/metrics"),
        ("post", "/reset"),
        ("get", "/reset_data"),
    ],
)
def test_every_endpoint_but_root_and_health_needs_the_token(make_client, method, path):
    c = make_client(store="memory", api_token=TOKEN)
    r = getattr(c, method)(path)
    assert r.status_code == 401, (path, r.text)
    assert r.headers["www-authenticate"] == "Bearer" and "token" in r.json()["error"]
    r = getattr(c, method)(path, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_token_grants_access_and_open_endpoints_stay_open(make_client):
    c = make_client(store="memory", api_token=TOKEN)
    assert c.get("/").status_code == 200 and c.get("/health").status_code == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    c.post("/register", json=registration(), headers=auth)
    assert c.get("/info", headers=auth).json()["batch_size"] == 8
    assert c.get("/reset_data").status_code == 401  # legacy reset refused without the token
    assert c.get("/info", headers=auth).json()["batch_size"] == 8
    assert c.get("/reset_data", headers=auth).text == "Reset successful"


def test_no_cors_by_default_and_never_wildcard_with_credentials(make_client):
    c = make_client(store="memory")
    r = c.options(
        "/status", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"}
    )
    assert "access-control-allow-origin" not in r.headers
    w = make_client(store="memory", cors_origins=["*"])
    r = w.get("/", headers={"Origin": "http://x.example"})
    assert r.headers.get("access-control-allow-origin") == "*"
    assert "access-control-allow-credentials" not in r.headers
    o = make_client(store="memory", cors_origins=["http://viewer.local"])
    r = o.get("/", headers={"Origin": "http://viewer.local"})
    assert r.headers["access-control-allow-origin"] == "http://viewer.local"
    assert r.headers["access-control-allow-credentials"] == "true"


def test_peek_is_read_only_and_pages(client):
    client.post("/register", json=registration(batch_size=2))
    client.get("/batch")
    client.post(
        "/register-env", json={"max_token_length": 64, "desired_name": "arith", "group_size": 2}
    )
    for i in range(5):
        client.post("/scored_data", json=group(2, env_id=0 if i % 2 == 0 else None, seed=i))
    first = client.get("/batch").json()
    p = client.get("/peek?limit=3").json()
    assert [g["seq"] for g in p["groups"]] == [3, 4, 5] and p["next_seq"] == 5
    allg = client.get("/peek?limit=50&after=0").json()
    states = {g["seq"]: g["state"] for g in allg["groups"]}
    assert states[1] == "delivered" and states[2] == "queued"
    assert allg["groups"][0]["group"]["tokens"] == first["batch"][0]["tokens"]
    assert [g["seq"] for g in client.get("/peek?after=3").json()["groups"]] == [4, 5]
    arith = client.get("/peek?env=arith_0").json()["groups"]
    assert [g["seq"] for g in arith] == [1, 3, 5] and all(g["env_name"] == "arith_0" for g in arith)
    assert client.get("/status").json()["queue_size"] == 4  # peeking consumed nothing
    assert client.get("/peek?after=5").json() == {"groups": [], "next_seq": 5}


def test_peek_history_is_bounded(make_client):
    c = make_client(store="memory", history_size=4)
    c.post("/register", json=registration(batch_size=2))
    for i in range(40):
        c.post("/scored_data", json=group(2, seed=i))
    for _ in range(41):
        c.get("/batch")
    seqs = [g["seq"] for g in c.get("/peek?limit=100&after=0").json()["groups"]]
    assert seqs[-1] == 40 and len(seqs) <= 4 + 8  # pruned every 8 acks


def test_metrics_exposes_queue_traffic_and_latency(client):
    client.post("/register", json=registration(batch_size=2))
    client.post("/scored_data", json=group(2))
    client.post("/scored_data", json=group(2, seed=1))
    client.get("/batch")
    text = client.get("/metrics").text
    for name in (
        "atropos_queue_groups 1.0",
        "atropos_groups_delivered_total 1.0",
        "atropos_batches_formed_total 1.0",
        "atropos_ingest_bytes_total",
        "atropos_batch_bytes_total",
        "atropos_batch_latency_seconds_count 1.0",
        'atropos_groups_received_total{env="none"} 2.0',
        "atropos_current_step 1.0",
    ):
        assert name in text, name


def test_batch_says_where_each_group_lies_and_the_client_parses_by_group(make_client):
    from atroposlib.api.client import load_batch_body

    c = make_client(store="sqlite", gzip_min_bytes=10**9)
    c.post("/register", json=registration(batch_size=6))
    sent = [group(2, length=50 + 10 * i, seed=i) for i in range(3)]
    for g in sent:
        assert c.post("/scored_data", json=g).status_code == 200
    r = c.get("/batch", headers={"Accept-Encoding": "identity"})
    sizes = [int(x) for x in r.headers["x-batch-group-bytes"].split(",")]
    body = r.content
    assert int(r.headers["content-length"]) == len(body)
    whole = orjson.loads(body)
    pos = len(b'{"batch":[')
    for size, g in zip(sizes, whole["batch"], strict=True):
        assert orjson.loads(body[pos : pos + size]) == g
        pos += size + 1
    assert [g["tokens"] for g in whole["batch"]] == [g["tokens"] for g in sent]
    assert load_batch_body(body, r.headers) == whole
    # a header that does not match the body (or none) falls back to one parse of the whole body
    assert load_batch_body(body, {"x-batch-group-bytes": "3,4,5"}) == whole
    assert load_batch_body(body, {}) == whole
    # no batch ready: no header, the legacy null answer
    r = c.get("/batch")
    assert r.json()["batch"] is None and "x-batch-group-bytes" not in r.headers


def test_no_dependency_is_sent_to_the_thread_pool():
    """FastAPI runs a plain ``def`` dependency in its thread pool: for the token check and the
    service lookup that was two thread hand-offs per request, ~0.2 ms of CPU (a quarter of a small
    request's). Every dependency of every route is a coroutine, so none leaves the event loop."""
    deps = {app_module.check_token}  # the router-wide token check
    for module in (admin, batches, ingest, registration_routes, status):
        for route in module.router.routes:
            for p in inspect.signature(route.endpoint).parameters.values():
                if isinstance(p.default, params.Depends):
                    deps.add(p.default.dependency)
    assert len(deps) >= 2
    blocking = sorted(d.__name__ for d in deps if not inspect.iscoroutinefunction(d))
    assert not blocking, f"dependencies run in the thread pool: {blocking}"

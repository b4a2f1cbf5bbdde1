"""Delivery guarantees: whatever is accepted is deliverable (no poison batch), an undeliverable
stored payload is quarantined instead of looping, and a trainer that acks explicitly never loses an
unacknowledged batch to Atropos's implicit ack (which still works for trainers that never ack)."""

from __future__ import annotations

import json

import httpx
from api_helpers import group, registration

from atroposlib.api.client import TrajectoryClient
from atroposlib.api.intake import IncomingGroup
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.service import RunService
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store import make_store
from atroposlib.type_definitions import Registration


def test_lone_surrogate_is_accepted_repaired_and_deliverable(run_api):
    api = run_api("--store", "sqlite")
    poison = group(2, seed=1, group_id="poison")
    poison["messages"][0][0]["content"] = "broken emoji \ud83d here"
    body = json.dumps(poison).encode()  # Python writes the lone surrogate as the escape \ud83d
    assert b"\\ud83d" in body
    with TrajectoryClient(api.url) as c:
        c.register(Registration(**registration(batch_size=4)))
        assert c.get_batch().batch is None
        with httpx.Client(base_url=api.url, timeout=10) as h:
            assert h.post("/scored_data", content=body).status_code == 200
        c.post_scored_data(group(2, seed=2, group_id="fine"))
        b = c.get_batch()  # before the fix: JSONDecodeError on every call, forever
        assert sorted(g["group_id"] for g in b.batch) == ["fine", "poison"]
        got = next(g for g in b.batch if g["group_id"] == "poison")
        assert got["messages"][0][0]["content"] == "broken emoji \ufffd here"
        assert got["tokens"] == poison["tokens"]
        c.ack_batch(b.batch_id)


def _store_bad_payload_like_an_older_version(data_dir):
    """A run whose queue holds one payload no client can parse (written before intake repaired
    lone surrogates), between two good groups."""
    settings = ApiSettings(data_dir=data_dir, store="sqlite")
    store = make_store(settings)
    svc = RunService(settings, store, ApiMetrics())
    svc.register(Registration(**registration(batch_size=4)))
    svc.get_batch_body()
    bad = b'{"tokens":[[1,2],[3,4]],"masks":[[1,2],[3,4]],"scores":[0.0,1.0],"group_id":"bad","messages":"\\ud83d"}'
    for gid, blob in (("g0", None), ("bad", bad), ("g1", None), ("g2", None)):
        blob = blob or json.dumps(group(2, seed=len(gid), group_id=gid)).encode()
        svc.ingest([IncomingGroup(blob, 2, None, None, 6, gid)])
    store.close()


def test_undeliverable_payload_is_quarantined_not_redelivered_forever(run_api, tmp_path):
    data = tmp_path / "old-run"
    _store_bad_payload_like_an_older_version(data)
    api = run_api("--store", "sqlite", "--resume", data_dir=data)
    with TrajectoryClient(api.url, retries=3) as c:
        # the first answer cannot be parsed; the client asks again, the API checks the batch,
        # quarantines the bad group and forms a new batch from the others
        b = c.get_batch()
        assert b.batch is not None and b.step == 1
        ids = [g["group_id"] for g in b.batch]
        assert "bad" not in ids and len(ids) == 2 and set(ids) <= {"g0", "g1", "g2"}
        c.ack_batch(b.batch_id)
        status = c.status()
        assert status.quarantined_groups == 1
        assert "atropos_quarantined_groups_total 1.0" in httpx.get(api.url + "/metrics").text
    assert "quarantined group" in api.log() and "group_id bad" in api.log()


def test_trainer_that_acks_gets_its_unacked_batch_again_without_register(client):
    client.post("/register", json=registration(batch_size=2))
    client.get("/batch")
    for i in range(2):
        client.post("/scored_data", json=group(2, seed=i, group_id=f"g{i}"))
    b1 = client.get("/batch").json()
    client.post("/batch/ack", json={"batch_id": b1["batch_id"]})  # this trainer acks explicitly
    b2 = client.get("/batch").json()
    # it crashes before acking b2 and comes back without /register: b2 again, not b3
    again = client.get("/batch").json()
    assert again["batch_id"] == b2["batch_id"] and again["step"] == b2["step"] == 2
    client.post("/batch/ack", json={"batch_id": b2["batch_id"]})
    assert client.get("/batch").json()["batch"] is None
    assert client.get("/status").json()["ack_mode"] == "explicit"


def test_ack_mode_header_protects_the_first_batch_too(client):
    client.post("/register", json=registration(batch_size=4))
    client.get("/batch")
    for i in range(2):
        client.post("/scored_data", json=group(2, seed=i))
    hdr = {"X-Atropos-Ack": "explicit"}
    b1 = client.get("/batch", headers=hdr).json()
    assert client.get("/batch", headers=hdr).json()["batch_id"] == b1["batch_id"]
    # a trainer that never acks (Atropos) still gets the implicit ack
    assert client.get("/batch").json()["batch"] is None
    assert client.get("/status").json()["ack_mode"] == "implicit"


def test_explicit_ack_mode_survives_a_restart(make_client):
    c = make_client()
    c.post("/register", json=registration(batch_size=2))
    c.get("/batch")
    for i in range(6):
        c.post("/scored_data", json=group(2, seed=i))
    b1 = c.get("/batch").json()
    c.post("/batch/ack", json={"batch_id": b1["batch_id"]})
    b2 = c.get("/batch").json()
    c.__exit__(None, None, None)
    d = make_client()
    assert d.get("/batch").json()["batch_id"] == b2["batch_id"]  # the restart redelivers it
    assert d.get("/batch").json()["batch_id"] == b2["batch_id"]  # and it is still not acked

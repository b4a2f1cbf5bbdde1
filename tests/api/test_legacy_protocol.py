"""Atropos 0.4 wire shapes and handshake, through TestClient(create_app(...)) on both stores."""

from __future__ import annotations

from api_helpers import env_registration, group, registration


def test_root_health_and_info_before_registration(client):
    assert client.get("/").json() == {"message": "AtroposLib API"}
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/info").json() == {"batch_size": -1, "max_token_len": -1}
    assert client.get("/wandb_info").json() == {"group": None, "project": None}
    assert client.get("/status").json()["current_step"] == 0
    latest = client.get("/latest_example").json()
    assert latest["tokens"] == [] and latest["images"] == []


def test_register_initializes_only_once(client):
    r1 = client.post("/register", json=registration(batch_size=8, starting_step=3))
    assert r1.status_code == 200 and isinstance(r1.json()["uuid"], int)
    r2 = client.post("/register", json=registration(batch_size=32, wandb_group="other"))
    assert r2.json()["uuid"] != r1.json()["uuid"]
    assert client.get("/info").json() == {"batch_size": 8, "max_token_len": 64}
    assert client.get("/wandb_info").json() == {"group": "grp", "project": "proj"}
    assert client.get("/status").json()["current_step"] == 3


def test_env_handshake_waits_for_trainer_then_numbers_names(client):
    client.post("/register", json=registration(starting_step=2))
    assert client.post("/register-env", json=env_registration()).json() == {
        "status": "wait for trainer to start"
    }
    assert client.get("/batch").json() == {"batch": None, "batch_id": None, "step": 2}
    a = client.post("/register-env", json=env_registration("arith")).json()
    b = client.post("/register-env", json=env_registration("arith")).json()
    c = client.post("/register-env", json=env_registration("gsm")).json()
    assert a == {
        "status": "success",
        "env_id": 0,
        "wandb_name": "arith_0",
        "checkpoint_dir": "ckpt",
        "starting_step": 2,
        "checkpoint_interval": 5,
        "num_steps": 100,
    }
    assert (b["env_id"], b["wandb_name"]) == (1, "arith_1")
    assert (c["env_id"], c["wandb_name"]) == (2, "gsm_0")


def test_disconnect_env(client):
    assert client.post("/disconnect-env", json={"env_id": 0}).json()["status"] == "failure"
    client.post("/register", json=registration())
    client.get("/batch")
    client.post("/register-env", json=env_registration())
    assert client.post("/disconnect-env", json={"env_id": 0}).json() == {"status": "success"}
    bad = client.post("/disconnect-env", json={"env_id": 5}).json()
    assert bad["status"] == "failure" and "5" in bad["error"]


def test_status_env_weights_follow_atropos_formula(client):
    client.post("/register", json=registration(batch_size=8))
    client.get("/batch")
    client.post(
        "/register-env", json=env_registration("a", max_token_length=100, weight=1.0, group_size=2)
    )
    client.post(
        "/register-env",
        json=env_registration(
            "b", max_token_length=300, weight=1.0, group_size=4, min_batch_allocation=0.25
        ),
    )
    client.post("/register-env", json=env_registration("c", max_token_length=100, weight=0.0001))
    s0 = client.request("GET", "/status-env", json={"env_id": 0}).json()
    s1 = client.request("GET", "/status-env", json={"env_id": 1}).json()
    s2 = client.request("GET", "/status-env", json={"env_id": 2}).json()
    total = 100 + 300 + 100 * 0.0001
    assert abs(s0["env_weight"] - 100 / total) < 1e-9
    assert abs(s1["env_weight"] - 300 / total) < 1e-9
    assert s2["env_weight"] == 0.01  # Atropos's floor against starvation
    assert s0["unallocated_fraction"] == 0.75
    assert set(s0) == {  # Atropos's keys, plus our staleness hints (ignored by Atropos envs)
        "current_step",
        "queue_size",
        "unallocated_fraction",
        "self_queue_size",
        "max_group_size",
        "env_weight",
        "max_staleness",
        "max_batches_offpolicy",
        "batch_share",
    }
    # queue counts: env a has 2 groups of 2, env b one group of 4 (its min allocation is 2 sequences)
    client.post("/scored_data", json=group(2, env_id=0, seed=1))
    client.post("/scored_data", json=group(2, env_id=0, seed=2))
    client.post("/scored_data", json=group(4, env_id=1, seed=3))
    s0 = client.request("GET", "/status-env", json={"env_id": 0}).json()
    assert s0["self_queue_size"] == 2 and s0["max_group_size"] == 4
    assert s0["queue_size"] == (4 + (4 - 2)) // 2
    # disconnecting b changes the weights of the others
    client.post("/disconnect-env", json={"env_id": 1})
    s0 = client.request("GET", "/status-env", json={"env_id": 0}).json()
    assert abs(s0["env_weight"] - 100 / (100 + 100 * 0.0001)) < 1e-9
    assert client.request("GET", "/status-env", json={"env_id": 9}).status_code == 404


def test_scored_data_and_list_shapes_and_batch_steps(client):
    client.post("/register", json=registration(batch_size=4))
    assert client.post("/scored_data", json=group(2)).json() == {"status": "received"}
    r = client.post("/scored_data_list", json=[group(2, seed=1), group(2, seed=2)])
    assert r.json() == {"status": "received", "groups_processed": 2}
    assert client.get("/status").json()["queue_size"] == 3
    b = client.get("/batch").json()
    assert len(b["batch"]) == 2 and b["step"] == 1 and b["batch_id"]
    assert sum(len(g["tokens"]) for g in b["batch"]) == 4
    g0 = b["batch"][0]
    # Atropos's keys are always present in a delivered group (null when absent)
    for k in (
        "advantages",
        "ref_logprobs",
        "generation_params",
        "overrides",
        "group_overrides",
        "images",
        "env_id",
    ):
        assert k in g0
    assert g0["tokens"] == group(2)["tokens"] and g0["messages"][0][1]["content"] == "2"
    assert client.get("/batch").json()["batch"] is None  # implicit ack of the first, nothing left
    assert client.get("/status").json()["current_step"] == 1
    assert client.get("/latest_example").json()["tokens"] == group(2, seed=2)["tokens"]


def test_reset_data_is_plain_text_and_clears_everything(client):
    client.post("/register", json=registration())
    client.post("/scored_data", json=group(2))
    r = client.get("/reset_data")
    assert r.status_code == 200 and r.text == "Reset successful"
    assert client.get("/info").json() == {"batch_size": -1, "max_token_len": -1}
    assert client.get("/status").json()["queue_size"] == 0
    client.post("/register", json=registration())
    client.post("/scored_data", json=group(2))
    assert client.post("/reset").json() == {"status": "reset"}
    assert client.get("/status").json()["queue_size"] == 0


def test_batch_before_register_is_a_clear_409(client):
    r = client.get("/batch")
    assert r.status_code == 409 and "register" in r.json()["error"]

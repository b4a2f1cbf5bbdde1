"""Payloads Atropos's own HTTP tests send, against a real ``run-api`` process.

``"messages": []`` on a one-sequence group and ``advantages`` whose lengths differ from the tokens
were accepted by Atropos. Here the group is accepted too, the malformed optional field is dropped
(nothing misaligned reaches a trainer), and every repair is counted in ``/status`` and logged once.
"""

from __future__ import annotations

import httpx
import pytest

REGISTER = {
    "wandb_group": "messages_test",
    "wandb_project": "messages_test",
    "batch_size": 1,
    "max_token_len": 512,
    "checkpoint_dir": "checkpoints",
    "save_checkpoint_interval": 10,
    "starting_step": 0,
    "num_steps": 100,
}


@pytest.mark.parametrize(
    "offload", [[], ["--offload-min-bytes", "0"]], ids=["on-the-loop", "offloaded"]
)
def test_odd_optional_fields_are_accepted_dropped_and_counted(run_api, offload):
    """Both ingest paths repair: small bodies on the event loop, large ones in the offload child
    (``--offload-min-bytes 0`` sends every body there)."""
    api = run_api("--store", "sqlite", *offload)
    h = httpx.Client(base_url=api.url, timeout=10)
    assert h.post("/register", json=REGISTER).status_code == 200
    empty_messages = {"tokens": [[4, 5, 6]], "masks": [[1, 1, 1]], "scores": [1.0], "messages": []}
    r = h.post("/scored_data", json=empty_messages)
    assert r.status_code == 200 and r.json()["status"] == "received", r.text
    short_advantages = {
        "tokens": [[1, 2, 3, 4, 5, 6]],
        "masks": [[-100, -100, 3, 4, 5, 6]],
        "scores": [1.0],
        "advantages": [[0.5, 0.3, 0.2]],
        "messages": [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]],
    }
    r = h.post("/scored_data_list", json=[short_advantages, short_advantages])
    assert r.status_code == 200 and r.json()["groups_processed"] == 2, r.text
    good = {"tokens": [[7, 8]], "masks": [[7, 8]], "scores": [0.0], "advantages": [[1.0, 1.0]]}
    assert h.post("/scored_data", json=good).status_code == 200

    status = h.get("/status").json()
    assert status["repaired_fields"] == {"messages": 1, "advantages": 2}
    assert status["queue_size"] == 4
    batches = []
    while len(batches) < 4:
        b = h.get("/batch").json()
        assert b["batch"], b
        batches.append(b["batch"][0])
        h.post("/batch/ack", json={"batch_id": b["batch_id"]})
    assert batches[0]["messages"] is None and batches[0]["tokens"] == [[4, 5, 6]]
    assert batches[1]["advantages"] is None and batches[1]["messages"][0][0]["content"] == "hi"
    assert batches[3]["advantages"] == [[1.0, 1.0]]  # a well-formed field is kept
    log = api.log()
    assert log.count("dropped malformed optional field 'advantages'") == 1
    assert log.count("dropped malformed optional field 'messages'") == 1


def test_required_fields_still_refused(run_api):
    api = run_api("--store", "memory")
    h = httpx.Client(base_url=api.url, timeout=10)
    h.post("/register", json=REGISTER)
    ragged_masks = {"tokens": [[1, 2, 3]], "masks": [[1, 2]], "scores": [1.0]}
    r = h.post("/scored_data", json=ragged_masks)
    assert r.status_code == 422 and "masks[0]" in r.text
    assert h.get("/status").json()["repaired_fields"] == {}


def test_launch_api_for_testing_starts_a_throwaway_server():
    from atroposlib.tests.api_test_utils import check_api_running, launch_api_for_testing
    from atroposlib.utils.net import free_port

    port = free_port()
    proc = launch_api_for_testing(max_wait_for_api=60, port=port)
    try:
        assert check_api_running(port)
        url = f"http://localhost:{port}"
        assert httpx.post(url + "/register", json=REGISTER).status_code == 200
        assert httpx.get(url + "/info").json()["batch_size"] == 1
    finally:
        proc.terminate()
        proc.wait(15)
    assert not check_api_running(port)

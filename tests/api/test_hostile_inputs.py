"""What a hostile client sends to a real ``run-api``, on both stores at once: one table of bad (and
odd-but-fine) inputs runs in the same order against a SQLite server and a memory server, and both
must give the same answer to every row, the one the table names. Then every group the table got
accepted is delivered exactly once, and the SQLite server, restarted, still holds what it answered.

The table holds what a schema fuzzer and hand-made cases found (issue 44): integers past SQLite's
64-bit range (``/peek?after=``, ``env_id``, ``policy_version``, the step arithmetic of
``starting_step``), lone UTF-16 surrogates in plain string fields (repaired, as in groups) and in ids
(refused: two ids that differ only in a surrogate would become one), non-finite or overflowing
weights, sizes that would make the packer's bitsets huge, and nesting deeper than a trainer's
standard ``json`` parser (or orjson's writer) can take.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Optional

import httpx
import pytest

from tests.api.api_helpers import env_registration, group, registration
from tests.live_servers import LiveServer, run_api_server, start_all

SURROGATE = "\ud83d"  # a lone UTF-16 surrogate: Python's json.dumps writes it, orjson refuses it
OTHER_SURROGATE = "\udc00"
NEST = "@NEST@"  # replaced by a nested list in the raw body (json.dumps itself cannot nest so deep)


def raw(obj: Any, nest: int = 0) -> bytes:
    """The body as Python's ``json`` writes it (``Infinity``, ``\\ud83d`` escapes, big integers),
    with ``NEST`` replaced by a list nested ``nest`` deep."""
    body = json.dumps(obj).encode()
    return body.replace(f'"{NEST}"'.encode(), b"[" * nest + b"0" + b"]" * nest)


REG = registration(batch_size=4, run_id="hostile")


# (what, method, path, body, query, expected status); run top to bottom on both stores
CASES: list[tuple[str, str, str, Optional[bytes], Optional[dict[str, Any]], int]] = [
    ("peek after past int64", "GET", "/peek", None, {"after": 2**63}, 422),
    ("peek after at int64's max", "GET", "/peek", None, {"after": 2**63 - 1}, 200),
    ("starting_step whose steps would overflow", "POST", "/register", raw({**REG, "starting_step": 2**63 - 1}), None, 422),
    ("batch_size of 2**40 sequences", "POST", "/register", raw({**REG, "batch_size": 2**40}), None, 422),
    ("num_steps past 64 bits", "POST", "/register", raw({**REG, "num_steps": 2**64}), None, 422),
    ("checkpoint interval past int64", "POST", "/register", raw({**REG, "save_checkpoint_interval": 2**63}), None, 422),
    ("extra key nested 300 deep", "POST", "/register", raw({**REG, "extra": NEST}, 300), None, 422),
    ("run_id with a lone surrogate", "POST", "/register", raw({**REG, "run_id": "r" + SURROGATE}), None, 422),
    ("lone surrogates in wandb fields and checkpoint_dir: repaired", "POST", "/register",
     raw({**REG, "wandb_group": "g" + SURROGATE, "wandb_project": SURROGATE, "checkpoint_dir": "c" + SURROGATE}), None, 200),
    ("wandb_info after the repaired registration", "GET", "/wandb_info", None, None, 200),
    ("the trainer's first batch", "GET", "/batch", None, None, 200),
    ("env weight Infinity", "POST", "/register-env", raw(env_registration(weight=float("inf"))), None, 422),
    ("env weight NaN", "POST", "/register-env", raw(env_registration(weight=float("nan"))), None, 422),
    ("env weight 1e308 (overflows the weight formula)", "POST", "/register-env", raw(env_registration(weight=1e308)), None, 422),
    ("env max_token_length past 64 bits", "POST", "/register-env", raw(env_registration(max_token_length=2**64)), None, 422),
    ("env group_size of 10**9", "POST", "/register-env", raw(env_registration(group_size=10**9)), None, 422),
    ("env name with a lone surrogate: repaired", "POST", "/register-env", raw(env_registration(name="e" + SURROGATE)), None, 200),
    ("status-env env_id past int64", "GET", "/status-env", None, {"env_id": 2**63}, 422),
    ("status-env by query", "GET", "/status-env", None, {"env_id": 0}, 200),
    ("disconnect-env env_id past 64 bits", "POST", "/disconnect-env", raw({"env_id": 2**64}), None, 422),
    ("group env_id past int64", "POST", "/scored_data", raw(group(env_id=2**63)), None, 422),
    ("group env_id past 64 bits", "POST", "/scored_data", raw(group(env_id=2**64)), None, 422),
    ("group policy_version past int64", "POST", "/scored_data", raw(group(policy_version=2**63)), None, 422),
    ("group_id with a lone surrogate", "POST", "/scored_data", raw(group(group_id="a" + SURROGATE)), None, 422),
    ("group_id differing from it only in the surrogate", "POST", "/scored_data", raw(group(group_id="a" + OTHER_SURROGATE)), None, 422),
    ("group nested 200 deep in generation_params", "POST", "/scored_data", raw(group(generation_params={"x": NEST}), 200), None, 422),
    ("group nested 1000 deep in an extra key", "POST", "/scored_data", raw(group(extra=NEST), 1000), None, 422),
    ("group nested 20 deep: fine", "POST", "/scored_data", raw(group(env_id=0, group_id="deep-ok", generation_params={"x": NEST}), 20), None, 200),
    ("group of an unregistered env -1 (kept, as Atropos)", "POST", "/scored_data", raw(group(env_id=-1, group_id="neg")), None, 200),
    ("lone surrogate in message text: repaired", "POST", "/scored_data",
     raw(group(env_id=0, group_id="surr-text", messages=[[{"role": "user", "content": "x" + SURROGATE}]] * 2)), None, 200),
    ("a list with one bad group is refused whole", "POST", "/scored_data_list",
     raw([group(env_id=0, group_id="l1"), group(policy_version=2**63)]), None, 422),
    ("a list of good groups", "POST", "/scored_data_list",
     raw([group(env_id=0, group_id="l2", seed=2), group(env_id=0, group_id="l3", seed=3)]), None, 200),
    ("Atropos's empty messages: repaired", "POST", "/scored_data", raw(group(env_id=0, group_id="fill", messages=[])), None, 200),
    ("ack of an id with a lone surrogate", "POST", "/batch/ack", raw({"batch_id": SURROGATE}), None, 404),
    ("ack of an empty id", "POST", "/batch/ack", raw({"batch_id": ""}), None, 422),
    ("peek of everything", "GET", "/peek", None, {"limit": 1000, "after": 0}, 200),
]  # fmt: skip
ACCEPTED_GROUPS = {"deep-ok", "neg", "surr-text", "l2", "l3", "fill"}
STORES = ("sqlite", "memory")
VARYING = {"uuid", "batch_id", "received_at", "oldest_wait_s"}


def _normalized(value: Any) -> Any:
    """An answer without the fields that differ from run to run (ids, clocks)."""
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Iterator[dict[str, LiveServer]]:
    root = tmp_path_factory.mktemp("hostile")
    # the memory server logs at uvicorn's trace level, which run-api used to refuse at start
    level = {"sqlite": "info", "memory": "trace"}
    servers = {
        store: run_api_server(root / store, "--store", store, "--log-level", level[store])
        for store in STORES
    }
    start_all(*servers.values())
    yield servers
    for s in servers.values():
        s.stop()


def _answers(server: LiveServer) -> list[tuple[int, Any]]:
    out = []
    with httpx.Client(base_url=server.url, timeout=30) as h:
        for _, method, path, body, query, _ in CASES:
            r = h.request(method, path, content=body, params=query)
            out.append((r.status_code, _normalized(r.json())))
    return out


def _drain(server: LiveServer) -> list[str]:
    """Every group_id delivered, acking each batch (explicitly) until none is left."""
    seen: list[str] = []
    with httpx.Client(base_url=server.url, timeout=30) as h:
        for _ in range(20):
            body = h.get("/batch", headers={"X-Atropos-Ack": "explicit"}).json()
            if body["batch"] is None:
                return seen
            seen += [g["group_id"] for g in body["batch"]]
            assert h.post("/batch/ack", json={"batch_id": body["batch_id"]}).status_code == 200
    raise AssertionError(f"still delivering after 20 batches: {seen}")


def test_both_stores_answer_the_bad_input_table_the_same_and_lose_nothing(stores):
    answers = {store: _answers(server) for store, server in stores.items()}
    mismatched = [
        (what, answers["sqlite"][i], answers["memory"][i])
        for i, (what, *_) in enumerate(CASES)
        if answers["sqlite"][i] != answers["memory"][i]
    ]
    assert not mismatched, mismatched
    wrong = [
        (what, expected, answers["memory"][i])
        for i, (what, _, _, _, _, expected) in enumerate(CASES)
        if answers["memory"][i][0] != expected
    ]
    assert not wrong, wrong
    by_case = {what: answer for (what, *_), answer in zip(CASES, answers["memory"], strict=True)}
    assert by_case["wandb_info after the repaired registration"][1] == {
        "group": "g\ufffd",
        "project": "\ufffd",
    }
    refused = by_case["group_id with a lone surrogate"][1]["error"]
    assert "group_id" in refused and "surrogate" in refused, refused
    # what the SQLite server answered is what its disk holds: restarted, it resumes the same run
    sqlite = stores["sqlite"].restart()
    with httpx.Client(base_url=sqlite.url, timeout=30) as h:
        assert h.get("/wandb_info").json() == {"group": "g\ufffd", "project": "\ufffd"}
        assert h.get("/info").json() == {"batch_size": 4, "max_token_len": 64}
    for store, server in stores.items():
        delivered = _drain(server)
        assert sorted(delivered) == sorted(ACCEPTED_GROUPS), (store, delivered)
        with httpx.Client(base_url=server.url, timeout=30) as h:
            assert h.get("/health").status_code == 200
            assert h.get("/status").json()["queue_size"] == 0
    assert "Traceback" not in sqlite.log() and "Traceback" not in stores["memory"].log()
    assert "ASGI [" in stores["memory"].log()  # it did log at trace level

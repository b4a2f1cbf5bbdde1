"""Smaller edges of the API: token id range, deep nesting, 405 + Allow, every setting as a flag,
the warning for an open non-loopback bind."""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
from api_helpers import group, registration

from atroposlib.api.settings import ApiSettings
from atroposlib.cli.run_api import build_parser
from atroposlib.utils.net import free_port


def test_token_ids_out_of_int64_or_negative_are_refused(client):
    client.post("/register", json=registration(batch_size=4))
    for bad in (-1, 2**63, 2**64 - 1, -(2**63)):
        g = group(2)
        g["tokens"][1][3] = bad
        r = client.post("/scored_data", content=orjson.dumps(g))
        assert r.status_code == 422, (bad, r.text)
        assert f"tokens[1][3] is {bad}; token ids are 0 .. 2**63-1" in r.json()["error"]
    for bad in (2**64, -(2**70), 10**30):  # beyond what orjson parses: lax validation refuses it
        g = group(2)
        g["tokens"][1][3] = bad
        r = client.post("/scored_data", content=json.dumps(g))
        assert r.status_code == 422 and "tokens[1][3]" in r.json()["error"], (bad, r.text)
    g = group(2)
    g["tokens"][0][0] = 2**63 - 1
    g["tokens"][1][0] = 0
    assert client.post("/scored_data", json=g).status_code == 200


def test_a_version_field_of_the_wrong_type_is_a_precise_422_and_loses_nothing(client):
    client.post("/register", json=registration(batch_size=4))
    for field, bad, where in (
        ("policy_version", "v7", "policy_version"),
        ("weights_versions", [[1, 2]], "weights_versions has 1 entries"),
        ("weights_versions", [[2, 1], [1, 1]], "weights_versions[0] is [2, 1]"),
    ):
        r = client.post("/scored_data", json={**group(2), field: bad})
        assert r.status_code == 422 and where in r.json()["error"], (field, bad, r.text)
    assert client.get("/status").json()["queue_size"] == 0  # nothing half-stored
    ok = client.post("/scored_data", json={**group(2), "weights_versions": [[1, 2], [2, 2]]})
    assert ok.status_code == 200 and client.get("/status").json()["queue_size"] == 1


def test_deep_nesting_is_a_422_not_a_500(client):
    for depth in (300, 5000):
        r = client.post("/scored_data", content=b"[" * depth + b"]" * depth)
        assert r.status_code == 422, (depth, r.text)
    g = group(2)
    nested: list = []
    for _ in range(400):  # nested inside an extra key: parsed, but deeper than a client reads
        nested = [nested]
    g["custom"] = nested
    r = client.post("/scored_data_list", json=[g])
    assert r.status_code in (200, 422) and r.status_code != 500


def test_405_names_the_allowed_methods(client):
    r = client.delete("/batch")
    assert r.status_code == 405 and r.headers["allow"] == "GET"
    r = client.get("/scored_data")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_every_setting_has_a_flag():
    flags = {a.dest for a in build_parser()._actions}
    missing = set(ApiSettings.model_fields) - flags
    assert not missing, f"settings without a run-api flag: {sorted(missing)}"
    args = build_parser().parse_args(["--max-queued-bytes", "1234", "--gzip-level", "5"])
    s = ApiSettings.from_env(**vars(args))
    assert s.max_queued_bytes == 1234 and s.gzip_level == 5


def test_open_non_loopback_bind_warns(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "atroposlib.cli.run_api",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--store",
            "memory",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(30)
    assert "warning: listening on 0.0.0.0 without --api-token" in line

"""What a hostile client cannot do to a real ``atropos-serve-model`` (the tiny model).

Isolation: one client's request cannot fail another's. What can be told at validation is a 400
naming the field (bounds on every integer, lone surrogates in any string), so it never reaches the
batch; a fault inside a batch fails only the request that caused it; every error, the 500 included,
is OpenAI's shape, and the schema says so (400, not FastAPI's 422).

Auth: with ``ATROPOS_ENGINE_API_KEY`` (or ``--api-key``) every route but ``/health`` wants
``Authorization: Bearer <key>``, the weight routes first of all (else anyone who can reach the port
loads weights from any local folder, or sets the version that envs stamp into ``policy_version``);
the ``openai`` client's ``api_key`` is that key; the schema declares the scheme. Without a key on a
non-loopback host the engine warns, as run-api does.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import httpx
import pytest

from atroposlib.utils.net import free_port, wait_for_http
from tests.inference.poison_server import POISON
from tests.live_servers import LiveServer, engine_server

JSON = {"Content-Type": "application/json"}
GOOD = {"prompt": [5, 6, 8, 9], "max_tokens": 48, "ignore_eos": True, "temperature": 1.0}


KEY = "engine-key-1"


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path, tmp_path_factory) -> Iterator[LiveServer]:
    """A server with a key, whose batch window gathers concurrent requests into one batch."""
    server = engine_server(
        tiny_model_dir,
        tmp_path_factory.mktemp("hostile"),
        "--batch-window-ms",
        "300",
        "--served-model-name",
        "tiny",
        api_key=KEY,
    ).start()
    yield server
    server.stop()


def _post(url: str, path: str, body: Any, key: Optional[str] = KEY) -> httpx.Response:
    # as Python's json writes it: a broken string goes out as a lone surrogate escape
    headers = {**JSON, "Authorization": f"Bearer {key}"} if key else JSON
    return httpx.post(url + path, content=json.dumps(body), headers=headers, timeout=120)


def _assert_openai_error(r: httpx.Response, status: int, param_prefix: str) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == status, err
    assert (err["param"] or "").startswith(param_prefix), err


def test_bad_seed_and_top_k_fail_alone_at_validation(engine):
    bad = {
        "seed": {"prompt": [5, 6], "max_tokens": 8, "n": 2, "seed": 2**64 - 1},
        "top_k": {"prompt": [5, 6], "max_tokens": 8, "top_k": 2**63},
    }
    with ThreadPoolExecutor(5) as pool:
        good = [pool.submit(_post, engine.url, "/v1/completions", GOOD) for _ in range(3)]
        refused = {k: pool.submit(_post, engine.url, "/v1/completions", v) for k, v in bad.items()}
        for field, answer in refused.items():
            _assert_openai_error(answer.result(), 400, field)
        for answer in good:
            r = answer.result()
            assert r.status_code == 200, r.text
            assert len(r.json()["choices"][0]["text"]) > 0


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"prompt": "2 + 2 = \ud83d"}, "prompt"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi \ud83d"}]}, "messages"),
        ("/v1/completions", {"prompt": "hi", "model": "m\ud83d"}, "model"),
        ("/v1/completions", {"prompt": "hi", "stop": ["\ud83d"]}, "stop"),
        ("/update_weight_version", {"new_version": "1" * 30}, "new_version"),
        ("/update_weights_from_disk", {"model_path": "x", "weight_version": "9" * 19}, "weight_version"),
        ("/v1/load_lora_adapter", {"lora_name": "a\ud83d", "lora_path": "p"}, "lora_name"),
    ],
)  # fmt: skip
def test_what_validation_can_tell_is_a_400_naming_the_field(engine, path, body, param):
    _assert_openai_error(_post(engine.url, path, body), 400, param)


def test_the_schema_declares_the_400s_it_answers(engine):
    schema = httpx.get(engine.url + "/openapi.json", timeout=30).json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "security" in schema["paths"]["/update_weights_from_disk"]["post"]
    assert "security" not in schema["paths"]["/health"]["get"]
    codes = {
        (path, method): set(op["responses"])
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
    }
    assert not [k for k, c in codes.items() if "422" in c], codes
    error = schema["paths"]["/v1/completions"]["post"]["responses"]["400"]
    assert error["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")
    assert {"200", "400", "401", "404", "500", "503"} <= codes[("/v1/completions", "post")]


@pytest.fixture(scope="module")
def poisoned(tiny_model_dir: Path, tmp_path_factory) -> Iterator[tuple[str, Path, int]]:
    port = free_port()
    log = tmp_path_factory.mktemp("poison") / "server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.inference.poison_server", str(tiny_model_dir), str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
        yield f"http://127.0.0.1:{port}", log, port
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_fault_inside_a_batch_fails_only_the_request_that_caused_it(poisoned):
    """The poisoned server has no key (it is built in-process, not by the CLI)."""
    url, log, port = poisoned
    poison = {"prompt": [POISON, POISON, 5], "max_tokens": 4}
    long_good = dict(GOOD, max_tokens=400)
    with ThreadPoolExecutor(6) as pool:
        # gathered into one batch with a poisoned prompt
        together = [pool.submit(_post, url, "/v1/completions", GOOD, None) for _ in range(2)]
        together.append(pool.submit(_post, url, "/v1/completions", poison, None))
        first = [f.result() for f in together]
        # rows in flight, and a poisoned request admitted into their running batch
        in_flight = [pool.submit(_post, url, "/v1/completions", long_good, None) for _ in range(3)]
        time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps(poison), headers=JSON)
        late = conn.getresponse()
        late_body = json.loads(late.read())
        later = [f.result() for f in in_flight]
    assert [r.status_code for r in first] == [200, 200, 500], [r.text for r in first]
    assert first[2].json()["error"]["type"] == "InternalServerError"
    assert late.status == 500 and late_body["error"]["code"] == 500, late_body
    assert [r.status_code for r in later] == [200, 200, 200], [r.text for r in later]
    assert all(r.json()["choices"][0]["finish_reason"] == "length" for r in later)
    # the connection that got the 500 is kept alive and answers the next request
    sock = conn.sock
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200 and conn.sock is sock
    conn.close()
    text = log.read_text()
    assert text.count("Traceback") == 2, text[-4000:]  # one per fault


PROTECTED = [
    ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("GET", "/v1/models", None),
    ("POST", "/update_weights_from_disk", {"model_path": "/tmp"}),
    ("POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": "/tmp"}),
    ("POST", "/v1/unload_lora_adapter", {"lora_name": "a"}),
    ("POST", "/update_weight_version", {"new_version": "999"}),
    ("GET", "/weight_info", None),
    ("GET", "/metrics", None),
]


def test_every_route_but_health_wants_the_key(engine):
    with httpx.Client(base_url=engine.url, timeout=60) as h:
        assert h.get("/health").status_code == 200
        for wrong in ({}, {"Authorization": "Bearer nope"}, {"Authorization": KEY}):
            for method, path, body in PROTECTED:
                r = h.request(method, path, json=body, headers=wrong)
                assert r.status_code == 401, (path, wrong, r.text)
                assert (
                    r.json()["error"]["code"] == 401 and r.headers["www-authenticate"] == "Bearer"
                )
        assert h.get("/weight_info", headers=engine.headers).json() == {"weight_version": "0"}
        ok = h.post(
            "/v1/completions", json={"prompt": "hi", "max_tokens": 2}, headers=engine.headers
        )
        assert ok.status_code == 200, ok.text


def test_the_openai_clients_api_key_is_the_key(engine):
    from openai import AuthenticationError, OpenAI

    good = OpenAI(base_url=engine.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    assert good.completions.create(model="tiny", prompt="hi", max_tokens=2).choices
    bad = OpenAI(base_url=engine.url + "/v1", api_key="other", max_retries=0, timeout=60)
    with pytest.raises(AuthenticationError):
        bad.completions.create(model="tiny", prompt="hi", max_tokens=2)


def test_a_non_loopback_host_without_a_key_warns(tiny_model_dir):
    base = [sys.executable, "-m", "atroposlib.cli.serve_model", "--model", str(tiny_model_dir)]
    port = free_port()
    proc = subprocess.Popen(
        [*base, "--host", "0.0.0.0", "--port", str(port), "--torch-threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline() if proc.stderr else ""
    finally:
        proc.terminate()
        proc.wait(30)
    assert "warning: listening on 0.0.0.0 without --api-key" in line, line
    assert "ATROPOS_ENGINE_API_KEY" in line


def test_the_flag_beats_the_environment_variable(monkeypatch, tiny_model_dir):
    from atroposlib.cli.serve_model import build_parser, engine_config

    monkeypatch.setenv("ATROPOS_ENGINE_API_KEY", "from-env")
    base = ["--model", str(tiny_model_dir)]
    assert engine_config(build_parser().parse_args(base)).api_key == "from-env"
    flagged = build_parser().parse_args([*base, "--api-key", "from-flag"])
    assert engine_config(flagged).api_key == "from-flag"
    assert "ATROPOS_ENGINE_API_KEY" in build_parser().format_help()

"""The servers the schema fuzzer runs against, one ``FuzzTarget`` each: how to start the real process,
where its schema comes from, what to put in it before the run and what must still hold after.

To fuzz another server, add one entry to ``TARGETS``. The managed-server proxy, for example, is
``FuzzTarget("proxy", start=<start the engine and the proxy in front of it, return the proxy's
LiveServer (its key as token)>, schema=published_schema)``: its schema is its own ``/openapi.json``,
and the default ``verify`` checks that ``/health`` still answers and its log holds no traceback.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import httpx

from tests.api.api_helpers import env_registration, group, registration
from tests.fuzz.proxy_target import proxy_still_serves, start_proxy
from tests.live_servers import LiveServer, engine_server, run_api_server

EXPLICIT = {"X-Atropos-Ack": "explicit"}
TOKEN = "fuzz-token"
EVERY_CHECK = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
FULL = ("examples", "coverage", "fuzzing")  # coverage: the boundary values (2**63, '', ...)
QUICK = ("examples", "fuzzing")  # for a target whose boundary values another target covers


def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, (r.request.url, r.status_code, r.text)
    body: dict[str, Any] = r.json()
    return body


def published_schema(server: LiveServer) -> dict[str, Any]:
    """The schema the server serves at ``/openapi.json``."""
    return _ok(httpx.get(server.url + "/openapi.json", headers=server.headers, timeout=30))


def run_api_schema(server: LiveServer) -> dict[str, Any]:
    """run-api publishes no schema: the one its app factory generates for these settings (the
    store does not change it; the token adds the bearer scheme)."""
    from atroposlib.api.app import create_app
    from atroposlib.api.settings import ApiSettings

    return create_app(ApiSettings(store="memory", api_token=server.token)).openapi()


def nothing_before(server: LiveServer) -> Any:
    return None


def still_healthy(server: LiveServer, before: Any) -> None:
    """``/health`` answers and the log holds no traceback (no fault, answered or not)."""
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200
    assert "Traceback" not in server.log(), server.log()[-4000:]


def groups_before_fuzzing(server: LiveServer) -> list[str]:
    """A registered trainer in explicit-ack mode (it acked one batch) and six queued groups: the
    fuzzer may take batches (``GET /batch``) but cannot ack them, so they must all still be
    delivered, once each, afterwards."""
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as h:
        _ok(h.post("/register", json=registration(batch_size=4, run_id="fuzz")))
        _ok(h.get("/batch"))  # the trainer started: envs may register
        _ok(h.post("/register-env", json=env_registration("fuzz-env", group_size=2)))
        for i in range(2):
            _ok(h.post("/scored_data", json=group(2, env_id=0, group_id=f"warm-{i}", seed=90 + i)))
        first = _ok(h.get("/batch", headers=EXPLICIT))
        _ok(h.post("/batch/ack", json={"batch_id": first["batch_id"]}))
        ids = [f"before-fuzz-{i}" for i in range(6)]
        for i, gid in enumerate(ids):
            _ok(h.post("/scored_data", json=group(2, env_id=0, group_id=gid, seed=i)))
    return ids


def each_group_delivered_once(server: LiveServer, ids: list[str]) -> None:
    """After the fuzzer: healthy, and every group queued before it is delivered exactly once."""
    still_healthy(server, ids)
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=30) as h:
        # envs the fuzzer registered may hold batch shares nothing fills: disconnect them
        for env_id in range(1, 100_000):
            if _ok(h.post("/disconnect-env", json={"env_id": env_id}))["status"] == "failure":
                break
        delivered: Counter[Optional[str]] = Counter()
        for _ in range(1000):
            body = _ok(h.get("/batch", headers=EXPLICIT))
            if body["batch"] is None:
                break
            delivered.update(g.get("group_id") for g in body["batch"])
            _ok(h.post("/batch/ack", json={"batch_id": body["batch_id"]}))
    assert {gid: delivered[gid] for gid in ids} == {gid: 1 for gid in ids}, delivered


def run_api_target(store: str, token: Optional[str], phases: tuple[str, ...]) -> FuzzTarget:
    def start(work: Path, model_dir: Path) -> LiveServer:
        return run_api_server(work / "data", "--store", store, token=token).start()

    return FuzzTarget(
        name=f"run-api-{store}-{'token' if token else 'open'}",
        start=start,
        schema=run_api_schema,
        prepare=groups_before_fuzzing,
        verify=each_group_delivered_once,
        # destructive by design: they discard the run, groups included
        exclude_paths=("/reset", "/reset_data"),
        phases=phases,
    )


def start_engine(work: Path, model_dir: Path) -> LiveServer:
    """The engine on the tiny model, kept small (n <= 4, a 64-token context) so that any request
    the fuzzer makes is answered in milliseconds."""
    args = ("--max-n", "4", "--max-model-len", "64")
    return engine_server(model_dir, work, *args, api_key=TOKEN).start()


def engine_still_generates(server: LiveServer, before: Any) -> None:
    still_healthy(server, before)
    r = httpx.post(
        server.url + "/v1/completions",
        json={"prompt": "1 + 1 =", "max_tokens": 4},
        headers=server.headers,
        timeout=60,
    )
    assert _ok(r)["choices"][0]["text"] is not None


@dataclass(frozen=True)
class FuzzTarget:
    """One server under the fuzzer. ``start(work_dir, model_dir)`` returns it running (its
    ``token``, if any, is sent with every request and the ``ignored_auth`` check runs);
    ``schema(server)`` is its OpenAPI document; ``prepare(server)`` runs before the fuzzer and
    what it returns goes to ``verify(server, it)`` after; ``max_examples`` bounds each operation."""

    name: str
    start: Callable[[Path, Path], LiveServer]
    schema: Callable[[LiveServer], dict[str, Any]]
    prepare: Callable[[LiveServer], Any] = nothing_before
    verify: Callable[[LiveServer, Any], None] = still_healthy
    exclude_paths: tuple[str, ...] = ()
    phases: tuple[str, ...] = FULL
    max_examples: int = 10
    checks: tuple[str, ...] = field(default=EVERY_CHECK)


TARGETS: list[FuzzTarget] = [
    # both stores and both token modes, each fuzzed in full (the token check does not depend on
    # the store; the other two pairs, one line each, cost ~20 s more than the tier's budget)
    run_api_target("sqlite", TOKEN, FULL),
    run_api_target("memory", None, FULL),
    FuzzTarget(
        name="engine",
        start=start_engine,
        schema=published_schema,
        verify=engine_still_generates,
    ),
    FuzzTarget(name="proxy", start=start_proxy, schema=published_schema, verify=proxy_still_serves),
]

__all__ = ["TARGETS", "FuzzTarget", "published_schema", "run_api_schema", "still_healthy"]

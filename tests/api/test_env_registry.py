"""Registered envs are typed records that survive a restart; an unknown env gets one answer."""

from __future__ import annotations

import orjson
import pytest
from api_helpers import env_registration, registration

from atroposlib.api.env_registry import EnvRecord, EnvRegistry
from atroposlib.api.http import ApiProblem
from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.service import RunService
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store import SqliteStore
from atroposlib.type_definitions import RegisterEnv, Registration


def _started(client) -> None:
    client.post("/register", json=registration())
    client.get("/batch")


def test_unknown_env_gets_the_same_message_from_every_endpoint(client):
    _started(client)
    client.post("/register-env", json=env_registration())
    status = client.request("GET", "/status-env", json={"env_id": 5})
    assert status.status_code == 404
    message = "unknown env_id 5 (1 registered)"
    assert status.json()["error"] == message
    # Atropos's /disconnect-env answered 200 {"status": "failure"}; its clients read that body
    gone = client.post("/disconnect-env", json={"env_id": 5})
    assert gone.status_code == 200
    assert gone.json() == {"status": "failure", "error": message}


def test_env_records_are_typed_and_survive_a_restart(tmp_path):
    settings = ApiSettings(data_dir=tmp_path / "d", store="sqlite")
    svc = RunService(settings, SqliteStore(settings.data_dir), ApiMetrics())
    svc.register(_registration())
    svc.get_batch()
    svc.register_env(RegisterEnv(**env_registration("arith", group_size=4, weight=2.0)))
    svc.register_env(RegisterEnv(**env_registration("arith", min_batch_allocation=0.5)))
    svc.disconnect_env(0)
    svc.store.close()
    again = RunService(settings, SqliteStore(settings.data_dir), ApiMetrics())
    first, second = list(again.envs)
    assert isinstance(first, EnvRecord)
    assert (first.real_name, first.group_size, first.weight, first.connected) == (
        "arith_0",
        4,
        2.0,
        False,
    )
    assert (second.real_name, second.min_batch_allocation, second.connected) == (
        "arith_1",
        0.5,
        True,
    )
    assert again.envs.min_sequences(8) == {1: 4}
    again.store.close()


def test_registry_lookup_and_stored_dict_shape():
    reg = EnvRegistry()
    rec = reg.new_record(RegisterEnv(**env_registration("gsm", group_size=3)))
    reg.put(rec)
    assert reg.find(0) is rec and reg.find(1) is None and reg.find(None) is None
    with pytest.raises(ApiProblem) as e:
        reg.get(1)
    assert e.value.status_code == 404
    stored = orjson.loads(orjson.dumps(rec.to_dict()))
    assert set(stored) == {
        "env_id",
        "max_context_len",
        "weight",
        "desired_name",
        "real_name",
        "connected",
        "min_batch_allocation",
        "group_size",
        "registered_at",
    }
    assert EnvRecord.from_dict({**stored, "extra": 1}) == rec


def _registration() -> Registration:
    return Registration(**registration())

"""Types flow through the API: every route declares its answer's model and status code, the
service answers with those models, and each answer on the wire validates against its declared
model (pre-serialised answers included: /batch, /peek, /latest_example)."""

from __future__ import annotations

from fastapi.responses import PlainTextResponse
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from atroposlib.api.metrics import ApiMetrics
from atroposlib.api.service import RunService
from atroposlib.api.settings import ApiSettings
from atroposlib.api.store import SqliteStore
from atroposlib.type_definitions import (
    DisconnectEnvResponse,
    Info,
    RegisterEnv,
    RegisterEnvResponse,
    RegisterResponse,
    Registration,
    Status,
    StatusEnv,
    WandbInfo,
)
from tests.api.api_helpers import env_registration, group, registration

PLAIN_TEXT = {"/metrics", "/reset_data"}


def _routes(app) -> dict[tuple[str, str], APIRoute]:
    """Every route by (method, path), included routers opened (newer FastAPI keeps them lazy)."""
    found: dict[tuple[str, str], APIRoute] = {}
    stack = list(app.routes)
    while stack:
        r = stack.pop()
        if isinstance(r, APIRoute):
            found.update({(method, r.path): r for method in r.methods})
        elif hasattr(r, "original_router"):
            stack.extend(r.original_router.routes)
    return found


def test_every_route_declares_its_model_and_status_code(client):
    routes = _routes(client.app)
    assert len(routes) >= 18
    for (method, path), route in routes.items():
        assert route.status_code == 200, (method, path)
        if path in PLAIN_TEXT:
            assert route.response_class is PlainTextResponse, path
        else:
            assert route.response_model is not None, (method, path)
    schema = client.app.openapi()  # the docs are generated from these declarations
    ok = schema["paths"]["/status"]["get"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"]["$ref"].endswith("/Status")
    errors = schema["paths"]["/scored_data"]["post"]["responses"]
    assert errors["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")


def test_each_answer_on_the_wire_is_its_declared_model(client):
    routes = _routes(client.app)

    def check(method: str, path: str, response) -> dict:
        assert response.status_code == 200, response.text
        model = routes[(method, path)].response_model
        TypeAdapter(model).validate_python(response.json())
        return response.json()

    check("GET", "/", client.get("/"))
    check("GET", "/health", client.get("/health"))
    check("GET", "/info", client.get("/info"))
    check("GET", "/latest_example", client.get("/latest_example"))
    check("POST", "/register", client.post("/register", json=registration(batch_size=2)))
    assert check("GET", "/batch", client.get("/batch"))["batch"] is None
    env = check("POST", "/register-env", client.post("/register-env", json=env_registration()))
    assert env["env_id"] == 0
    assert check(
        "POST", "/scored_data", client.post("/scored_data", json=group(env_id=0, group_id="a"))
    ) == {"status": "received"}
    listed = client.post("/scored_data_list", json=[group(env_id=0, group_id="a")])
    assert check("POST", "/scored_data_list", listed) == {
        "status": "received",
        "groups_processed": 1,
        "duplicates": 1,
    }
    batch = check("GET", "/batch", client.get("/batch"))
    assert len(batch["batch"]) == 1
    acked = client.post("/batch/ack", json={"batch_id": batch["batch_id"]})
    assert check("POST", "/batch/ack", acked) == {
        "status": "acked",
        "batch_id": batch["batch_id"],
        "step": 1,
    }
    check("GET", "/latest_example", client.get("/latest_example"))
    check("GET", "/peek", client.get("/peek"))
    check("GET", "/status", client.get("/status"))
    check("GET", "/status-env", client.request("GET", "/status-env", json={"env_id": 0}))
    check("GET", "/wandb_info", client.get("/wandb_info"))
    check("POST", "/disconnect-env", client.post("/disconnect-env", json={"env_id": 0}))
    check("POST", "/reset", client.post("/reset"))


def test_the_service_answers_with_models_and_keeps_the_registration_typed(tmp_path):
    settings = ApiSettings(data_dir=tmp_path / "d", store="sqlite")
    svc = RunService(settings, SqliteStore(settings.data_dir), ApiMetrics())
    assert isinstance(svc.info(), Info) and isinstance(svc.wandb_info(), WandbInfo)
    reg = Registration(**registration(batch_size=2, run_id="exp"))
    assert isinstance(svc.register(reg), RegisterResponse)
    wait = svc.register_env(RegisterEnv(**env_registration()))
    assert wait.model_dump(exclude_unset=True) == {"status": "wait for trainer to start"}
    svc.get_batch()
    joined = svc.register_env(RegisterEnv(**env_registration()))
    assert isinstance(joined, RegisterEnvResponse) and joined.checkpoint_dir == "ckpt"
    assert isinstance(svc.status(), Status) and isinstance(svc.status_env(0), StatusEnv)
    assert isinstance(svc.disconnect_env(0), DisconnectEnvResponse)
    assert svc.disconnect_env(7).status == "failure"
    svc.store.close()
    again = RunService(settings, SqliteStore(settings.data_dir), ApiMetrics())
    assert isinstance(again.registration, Registration)
    assert again.registration.run_id == "exp" and again.info().batch_size == 2
    again.store.close()

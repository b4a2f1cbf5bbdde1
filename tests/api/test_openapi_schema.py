"""The trajectory API's schema declares what the server takes: the bodies its routes parse by hand
(so a schema-driven client or fuzzer can call them), ``env_id`` on ``/status-env``, the
``X-Atropos-Ack`` header, and the bearer scheme exactly when a token is set. (The fuzzing tier,
``tests/fuzz``, runs the real server against this schema.)"""

from __future__ import annotations

import pytest

from atroposlib.api.app import create_app
from atroposlib.api.settings import ApiSettings

BODIES = {
    ("/register", "post"): "Registration",
    ("/register-env", "post"): "RegisterEnv",
    ("/disconnect-env", "post"): "EnvIdentifier",
    ("/scored_data", "post"): "ScoredData",
    ("/batch/ack", "post"): "BatchAck",
    ("/status-env", "get"): "EnvIdentifier",
}


def _schema(token=None) -> dict:
    return create_app(ApiSettings(store="memory", api_token=token)).openapi()


def _body_ref(operation: dict) -> dict:
    return operation["requestBody"]["content"]["application/json"]["schema"]


def test_the_bodies_parsed_by_hand_are_declared():
    schema = _schema()
    components = schema["components"]["schemas"]
    for (path, method), model in BODIES.items():
        ref = _body_ref(schema["paths"][path][method])
        assert ref == {"$ref": f"#/components/schemas/{model}"}, (path, ref)
        assert components[model]["type"] == "object"
    listed = _body_ref(schema["paths"]["/scored_data_list"]["post"])
    assert listed == {"type": "array", "items": {"$ref": "#/components/schemas/ScoredData"}}
    assert schema["paths"]["/register"]["post"]["requestBody"]["required"] is True
    assert schema["paths"]["/status-env"]["get"]["requestBody"]["required"] is False
    # the bounds the server enforces are in the schema
    version = components["ScoredData"]["properties"]["policy_version"]["anyOf"][0]
    assert version["maximum"] == 2**63 - 1
    assert components["Registration"]["properties"]["batch_size"]["maximum"] == 1_000_000


def test_parameters_and_headers_are_declared():
    paths = _schema()["paths"]
    env_id = {p["name"]: p for p in paths["/status-env"]["get"]["parameters"]}["env_id"]
    assert env_id["in"] == "query"
    ack = {p["name"]: p for p in paths["/batch"]["get"]["parameters"]}["X-Atropos-Ack"]
    assert ack["in"] == "header"
    headers = paths["/batch"]["get"]["responses"]["200"]["headers"]
    assert "x-batch-group-bytes" in headers


@pytest.mark.parametrize("token", [None, "t"])
def test_the_bearer_scheme_is_declared_when_a_token_is_set(token):
    schema = _schema(token)
    protected = schema["paths"]["/status"]["get"]
    open_ = schema["paths"]["/health"]["get"]
    if token:
        assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
        assert protected["security"] == [{"HTTPBearer": []}] and "401" in protected["responses"]
    else:
        assert "securitySchemes" not in schema["components"]
        assert "security" not in protected and "401" not in protected["responses"]
    assert "security" not in open_
    # a plain-text route's errors are JSON, as they are answered
    errors = schema["paths"]["/metrics"]["get"]["responses"]["422"]["content"]
    assert list(errors) == ["application/json"]

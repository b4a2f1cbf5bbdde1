"""The backends' weight-refresh routes through the registry: which server is which, reload and LoRA
against a stand-in that speaks SGLang's protocol, and the registry's refusals."""

from __future__ import annotations

import httpx
import pytest

from atroposlib.errors import ConfigError, InferenceError
from atroposlib.inference_clients.backend import APIServer
from atroposlib.inference_clients.backends.engine import EngineRoutes, EngineServer
from atroposlib.inference_clients.backends.sglang import SGLangRoutes
from atroposlib.inference_clients.backends.vllm import VLLMRoutes, VLLMServer
from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.registry import (
    BACKENDS,
    backend_class,
    probe_server_type,
    refreshable_server_types,
    weight_routes,
)
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.inference_clients.weight_routes import DiskReloadRoutes
from tests.inference_clients.sglang_like import sglang_like_server


@pytest.fixture
def sglang_like():
    with sglang_like_server() as (url, calls):
        yield url, calls


def test_the_registry_names_every_backend_once():
    assert list(BACKENDS) == ["atropos", "sglang", "vllm", "trl", "openai"]
    assert all(issubclass(cls, APIServer) for cls in BACKENDS.values())
    assert refreshable_server_types() == ["atropos", "sglang", "vllm"]
    # our engine speaks vLLM's protocol; only its refresh routes differ
    assert issubclass(EngineServer, VLLMServer) and EngineServer.weight_routes is not None
    assert EngineServer.weight_routes is not VLLMServer.weight_routes


def test_unknown_or_unrefreshable_server_types_are_config_errors():
    with pytest.raises(ConfigError, match="unknown server_type 'tgi'.*openai"):
        backend_class("tgi")
    with pytest.raises(ConfigError, match="unknown server_type"):
        ServerManager([APIServerConfig(base_url="http://127.0.0.1:9/v1", server_type="tgi")])
    for name in ("openai", "trl"):
        with pytest.raises(ConfigError, match="cannot load new weights"):
            weight_routes(name)


def test_sglang_reload_and_lora_routes(sglang_like, tmp_path):
    url, calls = sglang_like
    with httpx.Client() as http:
        kind = probe_server_type(http, url)
        assert kind == "sglang"
        routes = weight_routes(kind)
        routes.reload_from_disk(http, url, str(tmp_path / "step_1"))
        routes.load_lora(http, url, "policy", str(tmp_path / "a1"), replace=False)
        routes.load_lora(http, url, "policy", str(tmp_path / "a2"), replace=True)
    assert calls == [
        ("update_weights_from_disk", {"model_path": str(tmp_path / "step_1")}),
        ("load_lora_adapter", {"lora_name": "policy", "lora_path": str(tmp_path / "a1")}),
        ("unload_lora_adapter", {"lora_name": "policy"}),  # SGLang cannot load in place
        ("load_lora_adapter", {"lora_name": "policy", "lora_path": str(tmp_path / "a2")}),
    ]


def test_every_load_names_the_trainer_step_as_the_weights_version(sglang_like, tmp_path):
    """SGLang takes the label with the update (its weight_version) and with /update_weight_version
    after an adapter; the server then reports it with what it generates."""
    url, calls = sglang_like
    with httpx.Client() as http:
        routes = weight_routes("sglang")
        routes.reload_from_disk(http, url, str(tmp_path / "step_3"), version=3)
        routes.load_lora(http, url, "policy", str(tmp_path / "a"), replace=False, version=4)
    assert calls[0] == (
        "update_weights_from_disk",
        {"model_path": str(tmp_path / "step_3"), "weight_version": "3"},
    )
    assert calls[-1] == ("update_weight_version", {"new_version": "4"})


def test_our_engine_and_sglang_reload_through_the_one_disk_route(sglang_like, tmp_path):
    """Both post the same ``/update_weights_from_disk`` body, the version as SGLang's
    ``weight_version`` (``DiskReloadRoutes``)."""
    url, calls = sglang_like
    with httpx.Client() as http:
        for routes in (EngineRoutes(), SGLangRoutes()):
            assert isinstance(routes, DiskReloadRoutes)
            routes.reload_from_disk(http, url, str(tmp_path / "step_5"), version=5)
    body = {"model_path": str(tmp_path / "step_5"), "weight_version": "5"}
    assert calls == [("update_weights_from_disk", body)] * 2


def test_vllm_routes_explain_a_server_without_dev_mode(sglang_like, tmp_path):
    url, _ = (
        sglang_like  # it has no /pause and no /v1/load_lora_adapter, like vLLM without the flags
    )
    with httpx.Client() as http:
        with pytest.raises(InferenceError, match="VLLM_SERVER_DEV_MODE=1"):
            weight_routes("vllm").reload_from_disk(http, url, str(tmp_path))
        with pytest.raises(InferenceError, match="--enable-lora"):
            weight_routes("vllm").load_lora(http, url, "policy", str(tmp_path), replace=True)


def test_vllm_lora_loads_warn_once_when_the_server_rereads_the_adapter_every_step(
    sglang_like, tmp_path, caplog
):
    """A server without atroposlib's worker extension (no ``/collective_rpc``) would re-read an
    in-place-loaded adapter at every model step: the first load says so once, with the fix."""
    url, _ = sglang_like
    routes = VLLMRoutes()
    with httpx.Client() as http, caplog.at_level("WARNING"):
        for _ in range(2):
            with pytest.raises(InferenceError, match="--enable-lora"):
                routes.load_lora(http, url, "policy", str(tmp_path), replace=True)
    warned = [r.getMessage() for r in caplog.records if "33791" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "--worker-extension-cls atropos_vllm_ext.AtroposWorkerExtension" in warned[0]


def test_probe_refuses_a_server_it_cannot_identify(run_api):
    api = run_api("--store", "memory")  # answers /health, but is no inference server
    with httpx.Client() as http:
        with pytest.raises(ConfigError, match="--inference-server"):
            probe_server_type(http, api.url)
        with pytest.raises(InferenceError, match="cannot reach"):
            probe_server_type(http, "http://127.0.0.1:9")

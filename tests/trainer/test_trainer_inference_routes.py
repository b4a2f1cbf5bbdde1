"""The trainer's refresh routes per server kind, against a stand-in that speaks SGLang's protocol (SGLang
needs CUDA and cannot run here; vLLM and our engine are tested for real elsewhere)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from atroposlib.utils.net import free_port, wait_for_http
from example_trainer.config import TrainingConfig
from example_trainer.weight_refresh import LoraRefresh, ReloadRefresh


def _sglang_app(calls: list[tuple[str, dict[str, Any]]]) -> FastAPI:
    """SGLang's routes and answers: no /v1 prefix on LoRA routes, no in-place adapter replacement."""
    app = FastAPI()
    loaded: set[str] = set()

    @app.get("/health")
    async def health():
        return JSONResponse(None)

    @app.get("/get_server_info")
    async def info():
        return {"model_path": "m", "version": "0.4"}

    @app.post("/update_weights_from_disk")
    async def update(body: dict[str, Any]):
        calls.append(("update_weights_from_disk", body))
        return {"success": True, "message": "Succeeded to update model weights."}

    @app.post("/load_lora_adapter")
    async def load(body: dict[str, Any]):
        calls.append(("load_lora_adapter", body))
        if body["lora_name"] in loaded:
            return JSONResponse({"success": False, "error_message": "already loaded"}, 400)
        loaded.add(body["lora_name"])
        return {"success": True}

    @app.post("/unload_lora_adapter")
    async def unload(body: dict[str, Any]):
        calls.append(("unload_lora_adapter", body))
        loaded.discard(body["lora_name"])
        return {"success": True}

    return app


@pytest.fixture
def sglang_like():
    import uvicorn

    calls: list[tuple[str, dict[str, Any]]] = []
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(_sglang_app(calls), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for_http(f"http://127.0.0.1:{port}/get_server_info", timeout=30)
    yield f"http://127.0.0.1:{port}", calls
    server.should_exit = True
    thread.join(10)


def _cfg(tmp_path, url: str, mode: str) -> TrainingConfig:
    return TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh=mode,
        inference_urls=[url],
        async_refresh=False,
        lora_rank=2,
        lora_alpha=4,
    )


def test_reload_and_lora_use_sglangs_routes(sglang_like, tmp_path, tiny_model):
    from transformers import AutoModelForCausalLM

    url, calls = sglang_like
    reload = ReloadRefresh(_cfg(tmp_path, url, "reload"))
    reload.refresh(1, AutoModelForCausalLM.from_pretrained(tiny_model), None)
    reload.close()
    assert reload._kinds == {url: "sglang"}
    assert calls[0][0] == "update_weights_from_disk"
    assert calls[0][1]["model_path"].endswith("step_0000001")

    calls.clear()
    lora = LoraRefresh(_cfg(tmp_path, url, "lora"))
    model = lora.prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model))
    lora.start(str(tiny_model))
    lora.refresh(2, model, None)
    lora.refresh(3, model, None)
    lora.close()
    assert [c[0] for c in calls] == [
        "load_lora_adapter",  # published before the first rollout
        "unload_lora_adapter",  # SGLang cannot load in place
        "load_lora_adapter",
        "unload_lora_adapter",
        "load_lora_adapter",
    ]
    assert all(c[1]["lora_name"] == "policy" for c in calls)
    assert calls[-1][1]["lora_path"].endswith("step_0000003")

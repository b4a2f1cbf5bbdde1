"""A stand-in that speaks SGLang's weight-refresh protocol (SGLang needs CUDA and cannot run here; vLLM
and our engine are tested for real elsewhere), on a real loopback port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from atroposlib.utils.net import free_port, wait_for_http

Calls = list[tuple[str, dict[str, Any]]]


def sglang_app(calls: Calls) -> FastAPI:
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

    @app.post("/update_weight_version")
    async def label(body: dict[str, Any]):
        calls.append(("update_weight_version", body))
        return {"success": True, "new_version": body["new_version"]}

    @app.post("/unload_lora_adapter")
    async def unload(body: dict[str, Any]):
        calls.append(("unload_lora_adapter", body))
        loaded.discard(body["lora_name"])
        return {"success": True}

    return app


@contextmanager
def sglang_like_server() -> Iterator[tuple[str, Calls]]:
    """``(base URL, the calls it received)`` of a running stand-in."""
    import uvicorn

    calls: Calls = []
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(sglang_app(calls), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_http(f"http://127.0.0.1:{port}/get_server_info", timeout=30)
        yield f"http://127.0.0.1:{port}", calls
    finally:
        server.should_exit = True
        thread.join(10)

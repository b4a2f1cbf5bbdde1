"""Weight management: POST /update_weights_from_disk (SGLang's name) and vLLM's
/v1/load_lora_adapter, /v1/unload_lora_adapter.

The load itself runs in a worker thread; the engine swaps weights between batches and bumps the
``weights_version`` that ``/health`` and every response report.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from atroposlib.errors import ModelLoadError
from atroposlib.inference.deps import get_served
from atroposlib.inference.http import BadRequest
from atroposlib.inference.protocol import LoadLoraRequest, UnloadLoraRequest, UpdateWeightsRequest
from atroposlib.inference.served import ServedModel

router = APIRouter()


@router.post("/update_weights_from_disk")
async def update_weights(
    req: UpdateWeightsRequest, served: ServedModel = Depends(get_served)
) -> JSONResponse:
    eng = served.engine
    loop = asyncio.get_running_loop()
    try:
        version = await loop.run_in_executor(None, eng.reload_weights, req.model_path)
    except ModelLoadError as e:
        return JSONResponse(
            status_code=400,
            content={"success": False, "message": str(e), "weights_version": eng.weights_version},
        )
    return JSONResponse(
        {
            "success": True,
            "message": f"loaded weights from {req.model_path}",
            "weights_version": version,
        }
    )


@router.post("/v1/load_lora_adapter")
async def load_lora(req: LoadLoraRequest, served: ServedModel = Depends(get_served)) -> Response:
    eng = served.engine
    if req.lora_name in served.base_names:
        raise BadRequest(
            f"The lora adapter '{req.lora_name}' conflicts with a served base model.",
            "lora_name",
        )
    if req.lora_name in eng.adapters and not req.load_inplace:
        raise BadRequest(
            f"The lora adapter '{req.lora_name}' has already been loaded. If you want to load "
            "the adapter in place, set 'load_inplace' to True.",
            "lora_name",
        )
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, eng.load_lora, req.lora_name, req.lora_path)
    except ModelLoadError as e:
        raise BadRequest(str(e), "lora_path") from e
    return Response(
        f"Success: LoRA adapter '{req.lora_name}' added successfully.", media_type="text/plain"
    )


@router.post("/v1/unload_lora_adapter")
async def unload_lora(
    req: UnloadLoraRequest, served: ServedModel = Depends(get_served)
) -> Response:
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, served.engine.unload_lora, req.lora_name)
    except ModelLoadError as e:
        raise BadRequest(
            f"The lora adapter '{req.lora_name}' cannot be found.", "lora_name", status=404
        ) from e
    return Response(
        f"Success: LoRA adapter '{req.lora_name}' removed successfully.", media_type="text/plain"
    )


__all__ = ["router"]

"""Weight management: POST /update_weights_from_disk (SGLang's name), vLLM's
/v1/load_lora_adapter, /v1/unload_lora_adapter, and vLLM's dev-mode weight labels
(GET /weight_info, POST /update_weight_version).

The load itself runs in a worker thread; the engine swaps weights between batches and sets the
``weights_version`` that ``/health`` reports and every choice is stamped with (``weight_versions``):
the ``weight_version`` the load names (the trainer's step), else one more than before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from atroposlib.errors import ModelLoadError
from atroposlib.inference.deps import get_served
from atroposlib.inference.http import BadRequest
from atroposlib.inference.openapi import errors
from atroposlib.inference.protocol import (
    LoadLoraRequest,
    UnloadLoraRequest,
    UpdateWeightsRequest,
    UpdateWeightVersionRequest,
    WeightsLoadAnswer,
)
from atroposlib.inference.served import ServedModel

router = APIRouter()


@router.post(
    "/update_weights_from_disk",
    response_model=WeightsLoadAnswer,
    responses=errors(400, 500, s400=WeightsLoadAnswer),
)
async def update_weights(
    req: UpdateWeightsRequest, served: ServedModel = Depends(get_served)
) -> JSONResponse:
    eng = served.engine
    loop = asyncio.get_running_loop()
    label = int(req.weight_version) if req.weight_version is not None else None
    try:
        version = await loop.run_in_executor(None, eng.reload_weights, req.model_path, label)
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


@router.get("/weight_info")
async def weight_info(served: ServedModel = Depends(get_served)) -> dict[str, Any]:
    """vLLM's dev-mode route: the label of the weights being served."""
    return {"weight_version": str(served.engine.weights_version)}


@router.post("/update_weight_version", responses=errors(400))
async def update_weight_version(
    req: UpdateWeightVersionRequest, served: ServedModel = Depends(get_served)
) -> dict[str, Any]:
    """vLLM's dev-mode route: label the weights being served (after a LoRA load, say)."""
    served.engine.set_weights_version(int(req.new_version))
    return {"success": True, "new_version": req.new_version}


@router.post("/v1/load_lora_adapter", response_class=PlainTextResponse, responses=errors(400, 500))
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
        label = int(req.weight_version) if req.weight_version is not None else None
        await loop.run_in_executor(None, eng.load_lora, req.lora_name, req.lora_path, label)
    except ModelLoadError as e:
        raise BadRequest(str(e), "lora_path") from e
    return Response(
        f"Success: LoRA adapter '{req.lora_name}' added successfully.", media_type="text/plain"
    )


@router.post(
    "/v1/unload_lora_adapter", response_class=PlainTextResponse, responses=errors(400, 404)
)
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

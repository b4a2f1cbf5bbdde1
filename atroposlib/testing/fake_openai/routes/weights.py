"""Weights versions as vLLM's dev mode has them: GET /weight_info and POST /update_weight_version
(404 when the fake has no ``weights_version``, as vLLM outside dev mode)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel

router = APIRouter()


@router.get("/weight_info", status_code=200)
def weight_info(model: ScriptedModel = Depends(get_model)) -> Any:
    if model.weights_version is None:
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    return {"weight_version": model.weights_version}


@router.post("/update_weight_version", status_code=200)
async def update_weight_version(request: Request, model: ScriptedModel = Depends(get_model)) -> Any:
    if model.weights_version is None:
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    model.weights_version = str((await request.json())["new_version"])
    return {"success": True, "new_version": model.weights_version}


__all__ = ["router"]

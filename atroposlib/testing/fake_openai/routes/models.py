"""GET /v1/models: the one model the fake serves."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel

router = APIRouter()


@router.get("/v1/models", status_code=200)
def models(model: ScriptedModel = Depends(get_model)) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model.model, "object": "model"}]}


__all__ = ["router"]

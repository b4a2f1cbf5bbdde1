"""GET /health, as vLLM-like servers answer it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from atroposlib.testing.fake_openai.deps import get_model
from atroposlib.testing.fake_openai.scripted_model import ScriptedModel

router = APIRouter()


@router.get("/health", status_code=200)
def health(model: ScriptedModel = Depends(get_model)) -> dict[str, Any]:
    return {"status": "ok", "weights_version": 0, "model_path": model.model}


__all__ = ["router"]

"""What every generation route does first: record the request's body, then answer with an error
instead of generating when it asks for another model (``strict_model``: vLLM's 404) or a failure is
scripted (``fail_next``)."""

from __future__ import annotations

from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from atroposlib.testing.fake_openai.scripted_model import ScriptedModel


# internal: a route's signal to its own exception handler; it never leaves the fake server's app
class _Refused(Exception):
    """Raised by a route to answer ``response`` (an error) instead."""

    def __init__(self, response: JSONResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def refusal(model: ScriptedModel, body: Optional[dict[str, Any]] = None) -> Optional[JSONResponse]:
    """The error to answer ``body`` with (None: generate). ``body`` None: no model check."""
    asked = (body or {}).get("model")
    if model.strict_model and body is not None and asked != model.model:
        error = {
            "message": f"The model `{asked}` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        return JSONResponse({"error": error}, status_code=404)
    status = model.next_failure()
    if status is None:
        return None
    return JSONResponse({"error": {"message": f"scripted failure {status}"}}, status_code=status)


async def received(
    request: Request, model: ScriptedModel, check_model: bool = True
) -> dict[str, Any]:
    """The request's body, recorded in ``model.requests``; raises ``_Refused`` with the answer to
    give instead (an unknown model, a scripted failure)."""
    body: dict[str, Any] = await request.json()
    model.requests.append(body)
    if (response := refusal(model, body if check_model else None)) is not None:
        raise _Refused(response)
    return body


def install_refusal_handler(app: FastAPI) -> None:
    """Answer a ``_Refused`` with its response."""

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused) -> JSONResponse:
        return exc.response


__all__ = ["install_refusal_handler", "received", "refusal"]

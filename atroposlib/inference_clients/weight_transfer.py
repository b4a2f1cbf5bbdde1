"""The HTTP side of vLLM's weight-transfer API, as the trainer drives it (``--weight-refresh nccl``).

vLLM (started with ``VLLM_SERVER_DEV_MODE=1`` and ``--weight-transfer-config '{"backend": ...}'``)
takes new weights from a trainer that broadcasts them to its workers, in this order:

1. ``GET /get_world_size``: how many workers (ranks) the server has;
2. ``POST /init_weight_transfer_engine {"init_info": {..., "rank_offset", "world_size"}}``: the workers
   join the trainer's group; the call returns once they have, so the trainer joins concurrently;
3. per refresh: ``POST /pause?mode=wait`` (requests in flight finish on the old weights, new ones
   wait), ``POST /start_weight_update``, ``POST /update_weights {"update_info": {"names",
   "dtype_names", "shapes"}}`` (returns once the workers received every tensor: the trainer
   broadcasts them meanwhile, in that order), ``POST /finish_weight_update {"weight_version"}``,
   ``POST /resume``; ``GET /weight_info`` reads the version back.

Every call is bounded by the client's timeout, and every refusal is a ``WeightTransferError`` of one
line that names the route, the status and vLLM's message (and, for the usual set-up mistakes, the fix).
"""

from __future__ import annotations

from typing import Any, Optional

import httpx

from atroposlib.errors import WeightTransferError

_SETUP_HINT = (
    "start vLLM with VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config "
    '\'{"backend": "nccl"}\' (atropos_gloo for its CPU build, with atroposlib\'s worker extension)'
)


def _reason(r: httpx.Response) -> str:
    """vLLM's error message from an error answer, on one line."""
    try:
        body = r.json()
    except ValueError:
        body = None
    text = ""
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        text = str(err) if err is not None else ""
    text = text or r.text or r.reason_phrase
    return " ".join(text.split())[:300]


class WeightTransferClient:
    """One vLLM server's weight-transfer routes (``base``: its URL without ``/v1``)."""

    def __init__(self, http: httpx.Client, base: str) -> None:
        self.http = http
        self.base = base.rstrip("/")

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            r = self.http.request(method, self.base + path, **kw)
        except httpx.TimeoutException as e:
            raise WeightTransferError(
                f"transfer: {self.base}{path} did not answer within {self.http.timeout.read:.0f} s"
            ) from e
        except httpx.TransportError as e:
            raise WeightTransferError(
                f"transfer: cannot reach {self.base}{path}: {type(e).__name__}"
            ) from e
        if r.status_code == 404:
            raise WeightTransferError(
                f"transfer: {self.base} has no {path.split('?')[0]} route; {_SETUP_HINT}"
            )
        if r.status_code >= 400:
            reason = _reason(r)
            hint = f"; {_SETUP_HINT}" if "not configured" in reason.lower() else ""
            raise WeightTransferError(
                f"transfer: {self.base}{path.split('?')[0]} answered {r.status_code}: {reason}{hint}"
            )
        return r

    def world_size(self) -> int:
        body = self._call("GET", "/get_world_size").json()
        size = body.get("world_size") if isinstance(body, dict) else None
        if not isinstance(size, int) or size < 1:
            raise WeightTransferError(f"transfer: {self.base}/get_world_size answered {body!r}")
        return size

    def init(self, init_info: dict[str, Any]) -> None:
        self._call("POST", "/init_weight_transfer_engine", json={"init_info": init_info})

    def pause(self) -> None:
        self._call("POST", "/pause", params={"mode": "wait"})

    def start_update(self) -> None:
        self._call("POST", "/start_weight_update")

    def update(self, update_info: dict[str, Any]) -> None:
        self._call("POST", "/update_weights", json={"update_info": update_info})

    def finish_update(self, weight_version: Optional[str]) -> None:
        body = {"weight_version": weight_version} if weight_version is not None else None
        self._call("POST", "/finish_weight_update", json=body)

    def resume(self) -> None:
        self._call("POST", "/resume")

    def weight_version(self) -> Optional[str]:
        body = self._call("GET", "/weight_info").json()
        version = body.get("weight_version") if isinstance(body, dict) else None
        return None if version is None else str(version)

    def shutdown(self) -> None:
        self._call("POST", "/shutdown_weight_transfer_engine")


__all__ = ["WeightTransferClient"]

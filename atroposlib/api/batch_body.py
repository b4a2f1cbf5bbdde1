"""The ``GET /batch`` body on the client side, and the headers both sides of it use.

The server says where each group's JSON lies in the body (``X-Batch-Group-Bytes``) so that the
client parses the groups one by one (faster than one parse of a multi-MB document); a client says
with ``X-Atropos-Ack: explicit`` that it acks every batch it applies (see ``api.delivery``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from atroposlib.errors import BatchUndeliverable

GROUP_BYTES_HEADER = "x-batch-group-bytes"
ACK_MODE_HEADER = "X-Atropos-Ack"
"""``GET /batch`` request header: ``explicit`` says the caller acks every batch it applies."""
_BATCH_HEAD = b'{"batch":['


def load_batch_body(body: bytes, headers: Mapping[str, str]) -> Any:
    """Parse a ``GET /batch`` body. When the server says where each group's JSON lies
    (``X-Batch-Group-Bytes``), the groups are parsed one by one, which is faster than one parse of
    a multi-MB document; anything unexpected falls back to parsing the whole body."""
    sizes = headers.get(GROUP_BYTES_HEADER)
    if sizes:
        try:
            return _load_batch_groups(memoryview(body), [int(x) for x in sizes.split(",")])
        except (ValueError, orjson.JSONDecodeError):
            pass
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BatchUndeliverable(
            f"GET /batch: the batch body is not valid JSON ({e}); ask again and the API "
            "quarantines what cannot be delivered"
        ) from None


def _load_batch_groups(view: memoryview, sizes: list[int]) -> dict[str, Any]:
    pos = len(_BATCH_HEAD)
    if view[:pos] != _BATCH_HEAD:
        raise ValueError("unexpected start of a batch body")
    groups = []
    for i, size in enumerate(sizes):
        if i:
            if view[pos : pos + 1] != b",":
                raise ValueError("unexpected separator in a batch body")
            pos += 1
        group = orjson.loads(view[pos : pos + size])
        if not isinstance(group, dict):
            raise ValueError("a batch entry is not a JSON object")
        groups.append(group)
        pos += size
    if view[pos : pos + 2] != b"],":
        raise ValueError("unexpected end of a batch list")
    rest = orjson.loads(b"{" + view[pos + 2 :].tobytes())
    if not isinstance(rest, dict) or "batch" in rest:
        raise ValueError("unexpected batch body")
    return {"batch": groups, **rest}


__all__ = ["ACK_MODE_HEADER", "GROUP_BYTES_HEADER", "load_batch_body"]

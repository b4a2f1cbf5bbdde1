"""The byte framing of groups and batches, used by both the server and the client.

A stored group is the received JSON object with Atropos's absent keys appended as nulls
(``with_null_keys`` / ``null_members``). A ``GET /batch`` body is ``{"batch":[`` + the stored groups
separated by single commas + ``],"batch_id":...,"step":...}``: the server builds it as pieces
(``BatchBody``, sent without joining them) and says where each group's JSON lies in
``X-Batch-Group-Bytes`` (``GROUP_BYTES_HEADER``), so that the client parses the groups one by one
(``load_batch_body``, faster than one parse of a multi-MB document). A client says with
``X-Atropos-Ack: explicit`` that it acks every batch it applies (see ``api.delivery``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from atroposlib.errors import BatchUndeliverable

GROUP_BYTES_HEADER = "x-batch-group-bytes"
"""``GET /batch`` response header: the sizes of the groups' JSON objects, comma-separated, in order.
Absent when the body is gzipped or the batch is null. (HTTP header names are case-insensitive.)"""
ACK_MODE_HEADER = "X-Atropos-Ack"
"""``GET /batch`` request header: ``explicit`` says the caller acks every batch it applies."""
_BATCH_HEAD = b'{"batch":['


def null_members(keys: list[str]) -> bytes:
    """``"k1":null,"k2":null`` for ``keys`` (the members appended to a stored group)."""
    return b",".join(b'"' + k.encode() + b'":null' for k in keys)


def with_null_keys(raw: bytes, missing: list[str]) -> bytes:
    """The received JSON object with Atropos's absent keys appended as nulls (one copy)."""
    raw = raw.rstrip()
    if not missing:
        return raw
    return b"".join((memoryview(raw)[:-1], b",", null_members(missing), b"}"))


class BatchBody:
    """The JSON of a ``GET /batch`` answer as the pieces it is made of, so that it can be sent
    without first copying every stored payload into one buffer.

    ``parts`` concatenated are the body; ``group_bytes`` are the sizes of the groups' JSON objects,
    which follow ``{"batch":[`` in order, separated by commas (empty when ``batch`` is null).
    """

    __slots__ = ("parts", "group_bytes", "nbytes")

    def __init__(self, parts: list[bytes], group_bytes: list[int]) -> None:
        self.parts = parts
        self.group_bytes = group_bytes
        self.nbytes = sum(len(p) for p in parts)

    @classmethod
    def of(cls, batch_id: str, step: int, blobs: list[bytes]) -> BatchBody:
        """The body delivering the stored group payloads ``blobs`` as batch ``batch_id``."""
        tail = orjson.dumps({"batch_id": batch_id, "step": step})
        parts: list[bytes] = [_BATCH_HEAD]
        for i, blob in enumerate(blobs):
            if i:
                parts.append(b",")
            parts.append(blob)
        parts.append(b"]," + tail[1:])
        return cls(parts, [len(b) for b in blobs])

    @classmethod
    def empty(cls, step: int) -> BatchBody:
        """Atropos's answer when no batch can be formed: ``{"batch": null, ...}``."""
        return cls([orjson.dumps({"batch": None, "batch_id": None, "step": step})], [])

    def headers(self) -> dict[str, str]:
        """The framing header for an uncompressed response (none for a null batch)."""
        if not self.group_bytes:
            return {}
        return {GROUP_BYTES_HEADER: ",".join(map(str, self.group_bytes))}

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


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
            if view[pos : pos + 1].tobytes() != b",":
                raise ValueError("unexpected separator in a batch body")
            pos += 1
        group = orjson.loads(view[pos : pos + size])
        if not isinstance(group, dict):
            raise ValueError("a batch entry is not a JSON object")
        groups.append(group)
        pos += size
    if view[pos : pos + 2].tobytes() != b"],":
        raise ValueError("unexpected end of a batch list")
    rest = orjson.loads(b"{" + view[pos + 2 :].tobytes())
    if not isinstance(rest, dict) or "batch" in rest:
        raise ValueError("unexpected batch body")
    return {"batch": groups, **rest}


__all__ = [
    "ACK_MODE_HEADER",
    "GROUP_BYTES_HEADER",
    "BatchBody",
    "load_batch_body",
    "null_members",
    "with_null_keys",
]

"""The group and batch byte framing (``api.wire``): what the server builds, the client parses."""

from __future__ import annotations

import orjson
import pytest

from atroposlib.api.routes.ingest import LEGACY_KEYS
from atroposlib.api.views import EMPTY_EXAMPLE
from atroposlib.api.wire import (
    GROUP_BYTES_HEADER,
    BatchBody,
    load_batch_body,
    null_members,
    with_null_keys,
)
from atroposlib.type_definitions import ATROPOS_GROUP_KEYS, GROUP_KEYS, ScoredData


def test_group_key_lists_come_from_the_schema():
    assert set(GROUP_KEYS) == set(ScoredData.model_fields)
    assert LEGACY_KEYS == ATROPOS_GROUP_KEYS == GROUP_KEYS[: len(ATROPOS_GROUP_KEYS)]
    # Atropos 0.4's queued group keys and its empty /latest_example, as Atropos wrote them
    assert set(ATROPOS_GROUP_KEYS) == {
        "tokens",
        "masks",
        "scores",
        "advantages",
        "ref_logprobs",
        "messages",
        "generation_params",
        "inference_logprobs",
        "overrides",
        "group_overrides",
        "images",
        "env_id",
    }
    assert EMPTY_EXAMPLE == {
        "tokens": [],
        "masks": [],
        "scores": [],
        "advantages": [],
        "ref_logprobs": [],
        "generation_params": [],
        "inference_logprobs": [],
        "messages": [],
        "images": [],
    }


def test_null_keys_are_appended_to_the_received_bytes():
    raw = b'{"tokens": [[1]]}  \n'
    out = with_null_keys(raw, ["masks", "env_id"])
    assert orjson.loads(out) == {"tokens": [[1]], "masks": None, "env_id": None}
    assert with_null_keys(raw, []) == raw.rstrip()
    assert null_members([]) == b""


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_batch_body_built_by_the_server_is_parsed_group_by_group(n):
    groups = [{"tokens": [[i, i + 1]], "scores": [float(i)], "s": "," * i} for i in range(n)]
    body = BatchBody.of("b1", 7, [orjson.dumps(g) for g in groups]) if n else BatchBody.empty(7)
    whole = bytes(body)
    expected = (
        {"batch": groups, "batch_id": "b1", "step": 7}
        if n
        else {"batch": None, "batch_id": None, "step": 7}
    )
    assert orjson.loads(whole) == expected and body.nbytes == len(whole)
    headers = body.headers()
    assert (GROUP_BYTES_HEADER in headers) == bool(n)
    assert load_batch_body(whole, headers) == expected
    # a wrong framing header falls back to one parse of the whole body
    assert load_batch_body(whole, {GROUP_BYTES_HEADER: "1,2"}) == expected

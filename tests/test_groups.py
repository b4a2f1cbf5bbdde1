"""GroupBuilder (builds the validated model), normalize_group and the schema's per-sequence fields."""

from __future__ import annotations

import pytest

from atroposlib.errors import SchemaError
from atroposlib.groups import GroupBuilder, check_group, group_from_items, normalize_group
from atroposlib.type_definitions import ScoredData, ScoredDataGroup


def test_builder_builds_a_valid_group_and_names_mistakes():
    b = GroupBuilder(generation_params={"temperature": 1.0})
    b.add(
        [1, 2, 3],
        [-100, 2, 3],
        1.0,
        messages=[{"role": "user", "content": "q"}],
        inference_logprobs=[1.0, -0.1, -0.2],
    )
    b.add(
        [1, 2, 4],
        [-100, 2, 4],
        0.0,
        messages=[{"role": "user", "content": "q"}],
        inference_logprobs=[1.0, -0.3, -0.4],
    )
    g = b.build()
    assert isinstance(g, ScoredData)  # the model it validated: sending does not validate it again
    assert g.scores == [1.0, 0.0] and len(g.inference_logprobs) == 2 and g.reward_status is None
    with pytest.raises(SchemaError, match="inference_logprobs missing"):
        GroupBuilder().add([1], [1], 1.0, inference_logprobs=[0.0]).add([2], [2], 0.0)
    with pytest.raises(SchemaError, match="2 tokens but 1 masks"):
        GroupBuilder().add([1, 2], [1], 1.0)
    bad = GroupBuilder()
    bad.add([1, 2], [1, 2], 1.0, inference_logprobs=[0.0])
    with pytest.raises(SchemaError, match="inference_logprobs"):
        bad.build()
    unavailable = (
        GroupBuilder().add([1], [1], 0.0, reward_unavailable=True).add([2], [2], 0.0).build()
    )
    assert unavailable.reward_status == "unavailable"


def test_group_from_items_skips_none_and_leaves_validation_to_sending():
    g = group_from_items(
        [
            {"tokens": [1], "masks": [1], "scores": 1.0},
            None,
            {"tokens": [2], "masks": [2], "scores": 0.0},
        ]
    )
    assert g["tokens"] == [[1], [2]] and g["scores"] == [1.0, 0.0]
    assert group_from_items([None, None]) is None


def test_per_sequence_fields_come_from_the_schema_and_both_sides_use_them():
    from atroposlib import groups
    from atroposlib.type_definitions import per_sequence_fields

    fields = per_sequence_fields()
    assert {"advantages", "messages", "inference_logprobs", "distill_logprobs"} <= set(fields)
    assert not {"tokens", "masks", "scores", "images", "group_overrides"} & set(fields)
    assert set(fields) <= set(ScoredDataGroup.__annotations__)
    assert groups._PER_SEQUENCE == fields  # the builder and normalize_group use this one list
    base = {"tokens": [[1], [2]], "masks": [[1], [2]], "scores": [1.0, 0.0]}
    for name in fields:  # Atropos's builder leaves empty lists; every one of them is dropped
        assert name not in normalize_group({**base, name: []})
    assert set(GroupBuilder().optional) == set(fields)


def test_check_group_returns_the_model_and_names_the_problem():
    model = check_group({"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [1]})
    assert isinstance(model, ScoredData) and model.scores == [1.0]
    with pytest.raises(SchemaError, match=r"invalid ScoredDataGroup \(scores\)"):
        check_group({"tokens": [[1]], "masks": [[1]], "scores": "x"})
    with pytest.raises(SchemaError) as e:  # a validator's own message, without pydantic's prefix
        check_group({"tokens": [[1, 2]], "masks": [[1]], "scores": [1.0]})
    assert str(e.value) == (
        "invalid ScoredDataGroup (group): masks[0] has 1 values but tokens[0] has 2 tokens"
    )

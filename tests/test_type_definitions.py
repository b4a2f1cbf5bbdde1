"""The wire schema: what Atropos accepts stays accepted; what would corrupt training is refused."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from atroposlib.type_definitions import (
    ScoredData,
    ScoredDataGroup,
    ScoredDataItem,
    validate_group,
)


def _group(n: int = 2) -> dict:
    return {
        "tokens": [[1, 2, 3 + i] for i in range(n)],
        "masks": [[-100, 2, 3 + i] for i in range(n)],
        "scores": [float(i) for i in range(n)],
    }


def test_typed_dict_and_model_have_the_same_keys():
    assert set(typing.get_type_hints(ScoredDataGroup)) == set(ScoredData.model_fields)


def test_item_keys_are_a_subset_of_group_keys():
    assert set(typing.get_type_hints(ScoredDataItem)) <= set(ScoredData.model_fields)


def test_accepts_what_atropos_accepts():
    g = _group()
    g["messages"] = [
        [{"role": "narrator", "content": "héllo 🌍"}, {"role": "tool", "content": None, "x": 1}],
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    ]
    g["images"] = ["data:image/png;base64,AAAA"]
    g["some_future_key"] = {"a": 1}
    g["group_overrides"] = {"temperature": 1.0}
    out = validate_group(g).as_group()
    assert out["messages"][0][0]["content"] == "héllo 🌍"
    assert out["some_future_key"] == {"a": 1}
    assert out["images"] == g["images"]


def test_new_optional_fields_round_trip():
    g = dict(_group(), policy_version=7, group_id="abc", reward_status="unavailable")
    g["weights_versions"] = [[6, 7], [7, 7]]
    out = validate_group(g).as_group()
    assert (out["policy_version"], out["group_id"], out["reward_status"]) == (
        7,
        "abc",
        "unavailable",
    )
    assert out["weights_versions"] == [[6, 7], [7, 7]]
    assert "weights_versions" not in validate_group(_group()).as_group()  # older clients send none


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (
            lambda g: g.update(masks=[[1, 2], [1, 2, 3]]),
            "masks[0] has 2 values but tokens[0] has 3",
        ),
        (
            lambda g: g.update(inference_logprobs=[[0.0] * 3, [0.0] * 2]),
            "inference_logprobs[1] has 2",
        ),
        (lambda g: g.update(advantages=[[0.0] * 3]), "advantages has 1 sequences but tokens has 2"),
        (lambda g: g.update(scores=[1.0]), "scores has 1 entries but the group has 2"),
        (lambda g: g.update(tokens=[], masks=[], scores=[]), "empty group"),
        (lambda g: g.update(scores=[float("nan"), 0.0]), "finite"),
        (lambda g: g.update(inference_logprobs=[[0.0, float("inf"), 0.0]] * 2), "finite"),
        (lambda g: g.update(messages=[[{"content": "no role"}], []]), "messages[0][0]"),
        (lambda g: g.update(reward_status="broken"), "reward_status"),
        (lambda g: g.update(distill_token_ids=[[[1]] * 3] * 2), "given together"),
        (lambda g: g.update(weights_versions=[[1, 2]]), "weights_versions has 1 entries"),
        (lambda g: g.update(weights_versions=[[3, 2], [1, 1]]), "weights_versions[0] is [3, 2]"),
        (lambda g: g.update(weights_versions=[[1], [1, 1]]), "weights_versions[0] is [1]"),
        (lambda g: g.update(weights_versions=[[-1, 0], [1, 1]]), "weights_versions[0]"),
        (lambda g: g.update(weights_versions=[["a", 1], [1, 1]]), "weights_versions.0.0"),
        (lambda g: g.update(policy_version="seven"), "policy_version"),
    ],
)
def test_refuses_what_would_corrupt_training(mutate, fragment):
    g = _group()
    mutate(g)
    with pytest.raises(ValidationError) as e:
        validate_group(g)
    assert fragment in str(e.value)


def test_distillation_shapes_are_checked_per_token():
    g = _group()
    g["distill_token_ids"] = [[[1, 2]] * 3, [[1, 2]] * 3]
    g["distill_logprobs"] = [[[-0.1, -0.2]] * 3, [[-0.1, -0.2]] * 2 + [[-0.1]]]
    with pytest.raises(ValidationError) as e:
        validate_group(g)
    assert "distill_token_ids[1][2]" in str(e.value)

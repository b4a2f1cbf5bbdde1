"""GroupBuilder, prepare_groups (filters, stamping, unavailable rewards) and the on-disk spool."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from atroposlib.envs.config import BaseEnvConfig
from atroposlib.envs.groups import GroupBuilder, group_from_items
from atroposlib.envs.sending import JsonlGroupWriter, current_policy_version, prepare_groups
from atroposlib.envs.spool import Spool
from atroposlib.errors import ConfigError, SchemaError
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.type_definitions import ScoredDataGroup
from atroposlib.utils.tokenizer_loading import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(tiny_tokenizer_dir()))


def _env(tokenizer=None, **cfg):
    """The attributes prepare_groups reads from an env (a whole BaseEnv needs servers and an API)."""
    config = BaseEnvConfig(group_size=2, **cfg)
    return SimpleNamespace(
        config=config,
        max_token_len=-1,
        curr_step=5,
        env_id=3,
        tokenizer=tokenizer,
        process_mode=False,
    )


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
    assert (
        g["scores"] == [1.0, 0.0] and len(g["inference_logprobs"]) == 2 and "reward_status" not in g
    )
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
    assert unavailable["reward_status"] == "unavailable"


def test_group_from_items_skips_none():
    g = group_from_items(
        [
            {"tokens": [1], "masks": [1], "scores": 1.0},
            None,
            {"tokens": [2], "masks": [2], "scores": 0.0},
        ]
    )
    assert g["tokens"] == [[1], [2]] and g["scores"] == [1.0, 0.0]
    assert group_from_items([None, None]) is None


def test_prepare_filters_stamps_and_keeps_unavailable():
    env = _env()
    drops = Counter()
    same = {"tokens": [[1], [2]], "masks": [[1], [2]], "scores": [0.0, 0.0]}
    unavailable = dict(same, reward_status="unavailable")
    small = {"tokens": [[1]], "masks": [[1]], "scores": [1.0]}
    atropos_style = ScoredDataGroup()
    atropos_style["tokens"], atropos_style["masks"], atropos_style["scores"] = (
        [[1, 2], [3, 4]],
        [[-100, 2], [-100, 4]],
        [1, 0],
    )
    atropos_style["advantages"], atropos_style["images"] = [], []
    atropos_style["messages"] = [
        ({"role": "user", "content": "a"},),
        ({"role": "user", "content": "b"},),
    ]
    token = current_policy_version.set(4)
    try:
        out = prepare_groups(env, [same, unavailable, small, atropos_style, None], drops=drops)
    finally:
        current_policy_version.reset(token)
    assert drops == Counter({"same_scores": 1, "wrong_group_size": 1})
    assert [g["scores"] for g in out] == [[0.0, 0.0], [1.0, 0.0]]
    assert (
        out[0]["reward_status"] == "unavailable"
    )  # sent as-is, never turned into a dropped zero group
    assert all(g["policy_version"] == 4 and g["env_id"] == 3 and g["group_id"] for g in out)
    assert "advantages" not in out[1] and isinstance(out[1]["messages"][0], list)


def test_prepare_drops_too_long_and_invalid_and_fills_messages(tokenizer):
    env = _env(tokenizer, include_messages=True)
    env.max_token_len = 2
    drops = Counter()
    first, second = (
        tokenizer.encode("hi", add_special_tokens=False),
        tokenizer.encode("7", add_special_tokens=False),
    )
    assert (len(first), len(second)) == (2, 1)  # fits max_token_len=2
    long = {"tokens": [[1, 2, 3], [1]], "masks": [[1, 2, 3], [1]], "scores": [1.0, 0.0]}
    ragged = {"tokens": [[1, 2], [1]], "masks": [[1], [1]], "scores": [1.0, 0.0]}
    ok = {"tokens": [first, second], "masks": [first, second], "scores": [1.0, 0.0]}
    out = prepare_groups(env, [long, ragged, ok], drops=drops)
    assert drops == Counter({"too_long": 1, "invalid": 1})
    assert out[0]["messages"] == [
        [{"role": "text", "content": "hi"}],
        [{"role": "text", "content": "7"}],
    ]
    assert out[0]["policy_version"] == 5  # no worker context: the env's current step


def test_jsonl_writer_never_overwrites(tmp_path):
    (tmp_path / "g.jsonl").write_text("keep\n")
    w = JsonlGroupWriter(tmp_path / "g.jsonl")
    w.write({"a": 1})
    w.close()
    assert w.path.name == "g_1.jsonl" and (tmp_path / "g.jsonl").read_text() == "keep\n"
    assert w.path.read_text() == '{"a":1}\n'


def test_spool_is_ordered_durable_and_sets_rejects_aside(tmp_path):
    s = Spool(tmp_path)
    for i in range(3):
        s.append({"i": i})
    off, g = s.peek()
    assert g == {"i": 0}
    s.ack(off)
    with pytest.raises(ConfigError, match="used by another running env"):
        Spool(tmp_path)
    s.close()
    s2 = Spool(tmp_path)  # a restart resumes after the last acknowledged group
    assert s2.pending() == 2
    off, g = s2.peek()
    assert g == {"i": 1}
    s2.reject(off, g, "422 bad")
    off, g = s2.peek()
    assert g == {"i": 2}
    s2.ack(off)
    assert s2.peek() is None and s2.pending() == 0 and s2.rejected == 1
    assert '"reason":"422 bad"' in (tmp_path / "rejected.jsonl").read_text()
    s2.append({"i": 3})
    assert s2.peek()[1] == {"i": 3}


def test_per_sequence_fields_come_from_the_schema_and_both_sides_use_them():
    from atroposlib.envs import groups, sending
    from atroposlib.envs.sending import normalize_group
    from atroposlib.type_definitions import per_sequence_fields

    fields = per_sequence_fields()
    assert {"advantages", "messages", "inference_logprobs", "distill_logprobs"} <= set(fields)
    assert not {"tokens", "masks", "scores", "images", "group_overrides"} & set(fields)
    assert set(fields) <= set(ScoredDataGroup.__annotations__)
    assert groups._PER_SEQUENCE == sending._OPTIONAL_ROWS == fields
    base = {"tokens": [[1], [2]], "masks": [[1], [2]], "scores": [1.0, 0.0]}
    for name in fields:  # Atropos's builder leaves empty lists; every one of them is dropped
        assert name not in normalize_group({**base, name: []})
    assert set(GroupBuilder().optional) == set(fields)

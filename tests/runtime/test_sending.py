"""prepare_groups (filters, stamping, validating once, unavailable rewards), the JSONL group file
and the on-disk spool."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from atroposlib.errors import ConfigError
from atroposlib.groups import GroupBuilder
from atroposlib.launch.metrics import read_rows
from atroposlib.report.groups import LoadStats, iter_groups_jsonl
from atroposlib.runtime import sending
from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.runtime.context import RunContext
from atroposlib.runtime.sending import current_policy_version, prepare_groups
from atroposlib.runtime.sinks import JsonlGroupWriter
from atroposlib.runtime.spool import Spool
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.type_definitions import ScoredDataGroup
from atroposlib.utils.tokenizer_loading import load_tokenizer
from example_trainer.metrics import read_metrics


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(tiny_tokenizer_dir()))


def _run(**cfg):
    """What prepare_groups takes of an env: its config and run context (a whole BaseEnv needs
    servers and an API)."""
    return BaseEnvConfig(group_size=2, **cfg), RunContext(max_token_len=-1, curr_step=5, env_id=3)


def test_prepare_filters_stamps_and_keeps_unavailable():
    config, ctx = _run(ensure_scores_are_not_same=True)
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
        out = prepare_groups([same, unavailable, small, atropos_style, None], config, ctx)
    finally:
        current_policy_version.reset(token)
    assert ctx.drop_counts == Counter({"same_scores": 1, "wrong_group_size": 1})
    assert [g["scores"] for g in out] == [[0.0, 0.0], [1.0, 0.0]]
    assert (
        out[0]["reward_status"] == "unavailable"
    )  # sent as-is, never turned into a dropped zero group
    assert all(g["policy_version"] == 4 and g["env_id"] == 3 and g["group_id"] for g in out)
    assert "advantages" not in out[1] and isinstance(out[1]["messages"][0], list)


def test_all_equal_groups_are_kept_and_counted_unless_asked_to_drop(caplog):
    """One rule for serve and process: kept by default (counted, the first logged with the flag),
    dropped with ``ensure_scores_are_not_same`` (counted as a drop); unavailable ones never count."""
    same = {"tokens": [[1], [2]], "masks": [[1], [2]], "scores": [1.0, 1.0]}
    mixed = dict(same, scores=[1.0, 0.0])
    unavailable = dict(same, reward_status="unavailable")
    config, ctx = _run()
    assert config.ensure_scores_are_not_same is False
    with caplog.at_level("INFO", logger="atroposlib.runtime.sending"):
        out = prepare_groups([same, mixed, dict(same), unavailable], config, ctx)
    assert len(out) == 4 and ctx.all_equal_kept == 2 and not ctx.drop_counts
    kept_lines = [r for r in caplog.records if "keeping a group" in r.getMessage()]
    assert len(kept_lines) == 1 and "--env.ensure_scores_are_not_same true" in kept_lines[0].msg
    config, ctx = _run(ensure_scores_are_not_same=True)
    out = prepare_groups([same, mixed, dict(same), unavailable], config, ctx)
    assert len(out) == 2 and ctx.all_equal_kept == 0
    assert ctx.drop_counts == Counter({"same_scores": 2})


def test_prepare_drops_too_long_and_invalid_and_fills_messages(tokenizer):
    config, ctx = _run(include_messages=True)
    ctx.max_token_len = 2
    first, second = (
        tokenizer.encode("hi", add_special_tokens=False),
        tokenizer.encode("7", add_special_tokens=False),
    )
    assert (len(first), len(second)) == (2, 1)  # fits max_token_len=2
    long = {"tokens": [[1, 2, 3], [1]], "masks": [[1, 2, 3], [1]], "scores": [1.0, 0.0]}
    ragged = {"tokens": [[1, 2], [1]], "masks": [[1], [1]], "scores": [1.0, 0.0]}
    ok = {"tokens": [first, second], "masks": [first, second], "scores": [1.0, 0.0]}
    out = prepare_groups([long, ragged, ok], config, ctx, tokenizer)
    assert ctx.drop_counts == Counter({"too_long": 1, "invalid": 1})
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


def test_line_separators_inside_text_stay_inside_one_record(tmp_path):
    """A sampled reply may hold U+2028, U+0085 or \\x1c, which the writer leaves raw; every reader we
    ship (report/view-run loader, spool replay, the launcher's and the trainer's metrics readers)
    splits records at \\n only."""
    odd = "a\u2028b\u0085c\x1cd\u2029e"
    group = {
        "tokens": [[1, 2]],
        "masks": [[1, 2]],
        "scores": [1.0],
        "messages": [[{"content": odd}]],
    }
    w = JsonlGroupWriter(tmp_path / "g.jsonl")
    w.write(group)
    w.write(group)
    w.close()
    stats = LoadStats()
    back = list(iter_groups_jsonl(w.path, stats))
    assert [g["messages"][0][0]["content"] for g in back] == [odd, odd] and stats.lines == 2
    s = Spool(tmp_path / "spool")
    s.append(group)
    s.close()
    replayed = Spool(tmp_path / "spool")
    assert replayed.pending() == 1 and replayed.peek()[1] == group
    replayed.close()
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"step": 1, "note": odd}, ensure_ascii=False) + "\n")
    assert [r["note"] for r in read_rows(metrics)] == [odd]
    assert [r["note"] for r in read_metrics(metrics)] == [odd]


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


def test_a_built_group_is_validated_once_a_dict_once_when_sent(monkeypatch):
    checked = []
    real = sending.check_group
    monkeypatch.setattr(sending, "check_group", lambda g: checked.append(g) or real(g))
    built = GroupBuilder().add([1, 2], [-100, 2], 1.0).add([1, 3], [-100, 3], 0.0).build()
    as_dict = {"tokens": [[1, 2], [1, 3]], "masks": [[-100, 2], [-100, 3]], "scores": [1.0, 0.0]}
    config, ctx = _run()
    out = prepare_groups([built, as_dict], config, ctx)
    assert len(checked) == 1 and checked[0]["tokens"] == as_dict["tokens"]  # only the dict
    assert [g["scores"] for g in out] == [[1.0, 0.0], [1.0, 0.0]]
    assert all(isinstance(g, dict) and g["env_id"] == 3 and g["group_id"] for g in out)
    assert "policy_version" in out[0] and "reward_status" not in out[0]


def test_groups_carry_the_versions_the_servers_reported():
    """The item's generations were made by weights 6 and 7 (a refresh in between): a group the env
    built without versions gets that span for each sequence and the oldest as policy_version; one
    with per-sequence versions keeps them; without any report the step is an estimate, counted."""
    from atroposlib.inference_clients.generation_log import GenerationLog, item_log

    config, ctx = _run()
    plain = {"tokens": [[1, 2], [3, 4]], "masks": [[-100, 2], [-100, 4]], "scores": [1.0, 0.0]}
    own = dict(plain, weights_versions=[[8, 8], [7, 9]])
    log = GenerationLog()
    log.note_versions([(6, 6), (7, 7)])
    token, step = item_log.set(log), current_policy_version.set(2)
    try:
        spanned, kept = prepare_groups([dict(plain), own], config, ctx)
        item_log.set(None)
        (estimated,) = prepare_groups([dict(plain)], config, ctx)
    finally:
        item_log.reset(token)
        current_policy_version.reset(step)
    assert spanned["weights_versions"] == [[6, 7], [6, 7]] and spanned["policy_version"] == 6
    assert kept["weights_versions"] == [[8, 8], [7, 9]] and kept["policy_version"] == 7
    assert "weights_versions" not in estimated and estimated["policy_version"] == 2
    assert ctx.generation_notes == Counter({"groups_across_refresh": 2, "versions_estimated": 1})


def test_a_group_with_an_unknown_logprob_goes_without_inference_logprobs():
    """NaN is how the backends say "the server gave no logprob here": never sent as a number (the
    wire refuses NaN, and 0.0 would claim probability 1); the group keeps everything else."""
    from atroposlib.inference_clients.generation_log import GenerationLog, item_log

    config, ctx = _run()
    nan = float("nan")
    as_dict = {
        "tokens": [[1, 2], [3, 4]],
        "masks": [[-100, 2], [-100, 4]],
        "scores": [1.0, 0.0],
        "inference_logprobs": [[1.0, nan], [1.0, -0.5]],
    }
    built = GroupBuilder()
    built.add([1, 2], [-100, 2], 1.0, inference_logprobs=[1.0, nan])
    built.add([3, 4], [-100, 4], 0.0, inference_logprobs=[1.0, -0.5])
    log = GenerationLog()
    log.missing_logprobs = 1
    token = item_log.set(log)
    try:
        out = prepare_groups([as_dict, built.build()], config, ctx)
    finally:
        item_log.reset(token)
    assert len(out) == 2 and all("inference_logprobs" not in g for g in out)
    assert out[0]["scores"] == [1.0, 0.0] and ctx.drop_counts == Counter()
    assert ctx.generation_notes["groups_without_logprobs"] == 2
    assert sending.file_line(out[0], as_dict)["inference_logprobs"] is None  # no NaN in the file

"""``bench/trl_same_batch.py``'s input side: a step's batch read back from a real run-api store, split
into TRL's prompt / completion layout with TRL's advantages (the TRL half needs TRL's environment and
runs only in the bench)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import orjson
import pytest

from atroposlib.api.packing import GroupMeta
from atroposlib.api.store import SqliteStore
from atroposlib.api.store.base import ACKED, BatchRecord, GroupRow, Mutation

BENCH = Path(__file__).resolve().parents[2] / "bench" / "trl_same_batch.py"


@pytest.fixture(scope="module")
def same_batch():
    spec = importlib.util.spec_from_file_location("trl_same_batch", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _group(prompt: list[int], replies: list[list[int]], scores: list[float]) -> dict:
    return {
        "tokens": [prompt + r for r in replies],
        "masks": [[-100] * len(prompt) + r for r in replies],
        "scores": scores,
        "inference_logprobs": [[1.0] * len(prompt) + [-0.5] * len(r) for r in replies],
    }


def _store_run(run: Path, batches: dict[int, list[dict]]) -> None:
    store = SqliteStore(run / "api-data")
    seq = 0
    try:
        for step, groups in batches.items():
            rows = []
            for g in groups:
                seq += 1
                meta = GroupMeta(seq, len(g["tokens"]), env_id=0, max_len=9, nbytes=1)
                rows.append((GroupRow(meta, ACKED, "env_0"), store.stage(orjson.dumps(g))))
            seqs = list(range(seq - len(groups) + 1, seq + 1))
            store.commit(Mutation(new_groups=rows, new_batch=BatchRecord(f"b{step}", step, seqs)))
    finally:
        store.close()


def test_a_steps_batch_comes_back_split_as_trl_lays_it_out(same_batch, tmp_path):
    first = _group([5, 6, 7], [[8, 9], [10], [11, 12, 13], [14]], [1.0, 0.0, 0.0, 0.0])
    second = _group([20, 21], [[22], [23]], [1.0, 1.0])
    other = _group([30], [[31], [32]], [0.0, 1.0])
    _store_run(tmp_path, {3: [other], 4: [first, second]})

    groups = same_batch.load_batch(tmp_path, 4)
    assert groups == [first, second]
    seqs = same_batch.split_sequences(groups)
    assert [s["prompt"] for s in seqs] == [[5, 6, 7]] * 4 + [[20, 21]] * 2
    assert [s["completion"] for s in seqs] == [[8, 9], [10], [11, 12, 13], [14], [22], [23]]
    assert seqs[2]["inference_logprobs"] == [-0.5] * 3
    assert seqs[2]["trained"] == [1, 1, 1]
    # TRL's scale_rewards="group": mean 0.25, unbiased std sqrt(0.75 / 3) = 0.5, plus 1e-4
    assert seqs[0]["advantage"] == pytest.approx(0.75 / (0.5 + 1e-4))
    assert seqs[1]["advantage"] == pytest.approx(-0.25 / (0.5 + 1e-4))
    assert [s["advantage"] for s in seqs[4:]] == [0.0, 0.0]  # all equal: no signal
    assert not math.isclose(
        seqs[0]["advantage"], 0.75 / math.sqrt(0.1875)
    )  # not the population std


def test_a_step_without_a_batch_is_one_line(same_batch, tmp_path):
    _store_run(tmp_path, {1: [_group([1], [[2], [3]], [0.0, 1.0])]})
    with pytest.raises(SystemExit, match=r"no batch for step 7 .* it has steps 1\.\.1$"):
        same_batch.load_batch(tmp_path, 7)


def test_a_tool_result_inside_a_completion_is_out_of_trls_loss_too(same_batch):
    """A multi-turn episode: the completion runs from the first generated token to the end, and the
    tool's reply inside it is masked for both trainers (TRL's ``tool_mask``)."""
    episode = {
        "tokens": [[1, 2, 3, 4, 5, 6, 7]],  # prompt 1 2 | call 3 4 | tool reply 5 | answer 6 7
        "masks": [[-100, -100, 3, 4, -100, 6, 7]],
        "scores": [1.0],
    }
    (seq,) = same_batch.split_sequences([episode])
    assert seq["prompt"] == [1, 2] and seq["completion"] == [3, 4, 5, 6, 7]
    assert seq["trained"] == [1, 1, 0, 1, 1]
    assert seq["inference_logprobs"] is None


def test_our_side_gets_trls_advantages_per_token_and_the_one_temperature(same_batch):
    groups = [
        {**_group([5, 6], [[7], [8, 9]], [1.0, 0.0]), "generation_params": {"temperature": 0.7}},
        {**_group([5, 6], [[10], [11]], [0.0, 0.0]), "generation_params": {"temperature": 0.7}},
    ]
    assert same_batch.sampling_temperature(groups) == 0.7
    on_policy = same_batch.with_trl_advantages(groups, inference=False)
    lagged = same_batch.with_trl_advantages(groups, inference=True)
    a = 0.5 / (math.sqrt(0.5) + 1e-4)  # unbiased std of (1, 0)
    assert on_policy[0]["advantages"] == [[pytest.approx(a)] * 3, [pytest.approx(-a)] * 4]
    assert on_policy[1]["advantages"] == [[0.0] * 3, [0.0] * 3]
    assert all("inference_logprobs" not in g for g in on_policy)
    assert [g["inference_logprobs"] for g in lagged] == [g["inference_logprobs"] for g in groups]
    assert "advantages" not in groups[0]  # the store's groups are left as they were
    groups[1]["generation_params"] = {"temperature": 1.0}
    with pytest.raises(SystemExit, match=r"several temperatures: \[0.7, 1.0\]"):
        same_batch.sampling_temperature(groups)
    # none recorded: unknown, not a number made up (the caller says it uses the trainer's default)
    assert same_batch.sampling_temperature([_group([1], [[2]], [1.0])]) is None
    with pytest.raises(SystemExit, match="several temperatures"):
        same_batch.sampling_temperature([_group([1], [[2]], [1.0]), groups[0]])

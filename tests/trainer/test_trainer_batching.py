"""From API groups to padded tensors: advantages, masking of unavailable rewards, target alignment."""

from __future__ import annotations

import pytest
import torch

from example_trainer.batching import collate, flatten_batch, split_micro_batches


def _group(scores, **extra):
    n = len(scores)
    g = {
        "tokens": [[5, 6, 7 + i, 9] for i in range(n)],
        "masks": [[-100, -100, 7 + i, 9] for i in range(n)],
        "scores": list(scores),
        "inference_logprobs": [[1.0, 1.0, -0.5, -0.25] for _ in range(n)],
    }
    g.update(extra)
    return g


def test_unavailable_groups_are_dropped_and_counted():
    flat = flatten_batch([_group([1, 0]), _group([0, 0], reward_status="unavailable")], seq_len=16)
    assert flat.masked_groups == 1 and len(flat.sequences) == 2 and flat.group_scores == [0.5]


def test_env_advantages_win_over_scores():
    adv = [[0.0, 0.0, 3.0, 3.0], [0.0, 0.0, -3.0, -3.0]]
    flat = flatten_batch([_group([1, 0], advantages=adv)], seq_len=16)
    assert flat.advantages_from_env == 1 and flat.sequences[0].advantages == [0.0, 0.0, 3.0, 3.0]
    flat = flatten_batch([_group([1, 0])], seq_len=16)
    assert flat.sequences[0].advantages == pytest.approx([1.0] * 4, abs=1e-5)
    assert flat.sequences[1].advantages == pytest.approx([-1.0] * 4, abs=1e-5)


def test_shuffled_control_keeps_scores_but_permutes_advantages():
    scores = [1, 0, 0, 0, 0, 0, 0, 0]
    moved = 0
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        flat = flatten_batch([_group(scores)], seq_len=16, shuffle_generator=g)
        assert [s.score for s in flat.sequences] == scores  # reported reward is the real one
        moved += flat.sequences[0].advantages[0] < 0
    assert moved >= 1


def test_collate_aligns_targets_masks_and_logprobs():
    flat = flatten_batch([_group([1, 0])], seq_len=16)
    mb = collate(flat.sequences[:1], pad_id=0)
    assert mb.input_ids.tolist() == [[5, 6, 7]]
    assert mb.targets.tolist() == [[6, 7, 9]]
    assert mb.mask.tolist() == [[0.0, 1.0, 1.0]]
    assert mb.inf_logprobs.tolist() == [[1.0, -0.5, -0.25]]


def test_padding_and_truncation():
    g = _group([1, 0])
    g["tokens"][1] = [5, 6, 8, 9, 9, 9]
    g["masks"][1] = [-100, -100, 8, 9, 9, 9]
    g["inference_logprobs"][1] = [1.0, 1.0, -0.1, -0.1, -0.1, -0.1]
    flat = flatten_batch([g], seq_len=5)
    assert flat.truncated == 1 and len(flat.sequences[1].tokens) == 5
    mb = collate(flat.sequences, pad_id=0)
    assert mb.input_ids.shape == (2, 4)
    assert mb.mask[0].tolist() == [0.0, 1.0, 1.0, 0.0] and mb.attention_mask[0].tolist() == [
        1,
        1,
        1,
        0,
    ]


def test_micro_batches_by_count_and_by_token_budget():
    flat = flatten_batch([_group([1, 0, 1, 0, 1])], seq_len=16)
    assert [len(m) for m in split_micro_batches(flat.sequences, num_micro_batches=2)] == [3, 2]
    chunks = split_micro_batches(flat.sequences, max_tokens=8)  # 4 tokens each: two per chunk
    assert [len(m) for m in chunks] == [2, 2, 1]


def test_temperature_comes_from_the_flag_or_the_groups_generation_params():
    from atroposlib.errors import SchemaError

    g = {"tokens": [[1, 2, 3]], "masks": [[-100, 2, 3]], "scores": [1.0]}
    hot = dict(g, generation_params={"temperature": 0.7})
    greedy = dict(g, generation_params={"temperature": 0})
    flat = flatten_batch([g, hot, greedy], seq_len=8, temperature_from_groups=True)
    assert [s.temperature for s in flat.sequences] == [1.0, 0.7, 1.0]
    assert [s.temperature for s in flatten_batch([hot], seq_len=8).sequences] == [1.0]
    assert [s.temperature for s in flatten_batch([g], seq_len=8, temperature=0.5).sequences] == [
        0.5
    ]
    mb = collate(flatten_batch([g, hot], seq_len=8, temperature_from_groups=True).sequences)
    assert mb.inv_temperature[:, 0].tolist() == pytest.approx([1.0, 1 / 0.7])
    assert collate(flatten_batch([g], seq_len=8).sequences).inv_temperature is None
    bad = dict(g, group_id="g7", generation_params={"temperature": "hot"})
    with pytest.raises(SchemaError, match="group 'g7': generation_params.temperature"):
        flatten_batch([bad], seq_len=8, temperature_from_groups=True)


def test_unscored_sequences_are_left_out_and_the_rest_of_the_group_trains():
    g = _group([1.0, 0.5, 0.0], reward_statuses=["ok", "unavailable", "ok"])
    flat = flatten_batch([g], seq_len=16)
    assert flat.unscored == 1 and [s.score for s in flat.sequences] == [1.0, 0.0]
    assert flat.group_scores == [0.5]  # the placeholder is not a reward
    assert flat.sequences[0].advantages[0] > 0 > flat.sequences[1].advantages[0]


def test_overlong_sequences_are_kept_masked_or_penalized_and_counted():
    g = _group([1.0, 1.0, 0.0, 0.0], overlong=[False, True, False, True])
    kept = flatten_batch([g], seq_len=16)
    assert kept.overlong == 2 and len(kept.sequences) == 4 and kept.overlong_masked == 0
    masked = flatten_batch([g], seq_len=16, overlong="mask")
    assert masked.overlong_masked == 2 and [s.tokens[2] for s in masked.sequences] == [7, 9]
    # the masked ones still count in the baseline: the same advantages as when kept
    assert masked.sequences[0].advantages == kept.sequences[0].advantages
    penalized = flatten_batch([g], seq_len=16, overlong="penalize", overlong_penalty=1.0)
    assert penalized.overlong_penalized == 2 and len(penalized.sequences) == 4
    advs = [s.advantages[0] for s in penalized.sequences]
    assert advs[0] > advs[1] and advs[2] > advs[3]  # cut replies lose to finished ones
    assert [s.score for s in penalized.sequences] == [1.0, 1.0, 0.0, 0.0]  # reported: the env's

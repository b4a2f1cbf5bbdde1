"""Shared-prefix packing (``example_trainer/prefix_packing.py``): the sequences of a group run their prompt
once, and the loss, its gradient and every statistic but the computed token count are those of the
plain layout; a model that would not give the same log-probabilities packed is found at set-up."""

from __future__ import annotations

import random

import pytest
import torch
from _trainer_helpers import scripted_groups, with_teacher_and_reference

from example_trainer.batching import Sequence, collate, flatten_batch
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo
from example_trainer.prefix_packing import (
    layout,
    pack_rows,
    prefix_sharing_check,
    row_length,
    shareable_length,
)
from example_trainer.train_step import train_step


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def policy(request, tiny_model):
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    model.set_attn_implementation(request.param)
    return model


def _seq(tokens: list[int], first_trained: int) -> Sequence:
    return Sequence(
        tokens=tokens,
        trained=[i >= first_trained for i in range(len(tokens))],
        advantages=[1.0] * len(tokens),
        score=0.0,
    )


def _step(model, groups, cfg, share, ref_model=None):
    model.zero_grad(set_to_none=True)
    flat = flatten_batch(
        groups,
        seq_len=cfg.seq_len,
        temperature=cfg.temperature,
        temperature_from_groups=cfg.temperature_from_groups,
    )
    stats = train_step(
        model, ref_model, flat, cfg, DistInfo(), torch.device("cpu"), 0, share_prefix=share
    )
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return stats, grad


def test_a_group_becomes_one_row_and_unrelated_prompts_stay_apart():
    rng = random.Random(0)
    prompt = [rng.randrange(3, 300) for _ in range(12)]
    group = [_seq(prompt + [rng.randrange(3, 300) for _ in range(4)], 12) for _ in range(6)]
    other = _seq([7] * 5 + [8, 9, 10], 5)  # shares no token with the group
    assert [other] in pack_rows([*group, other])
    rows = pack_rows(group)
    assert [len(r) for r in rows] == [6]
    big = rows[0]
    # the prompt's first 11 input positions once, then 4 positions per reply: the prompt's last
    # token (its output predicts the reply's first token, a trained one) and the reply's first 3
    assert shareable_length(group[0]) == 11
    assert row_length(big) == 11 + 6 * 4
    # a cap on the row length splits the group
    capped = pack_rows(group, max_row_tokens=11 + 3 * 4)
    assert [len(r) for r in capped] == [3, 3] and all(row_length(r) <= 23 for r in capped)


def test_rows_are_cut_even_when_a_system_prompt_links_every_group():
    """Every group shares a long system prompt: one greedy row would hold most groups beside a short
    last one, and all rows are padded to the longest; the cut is made even instead."""
    rng = random.Random(1)
    system = [rng.randrange(3, 300) for _ in range(30)]
    seqs = []
    for _ in range(4):
        prompt = system + [rng.randrange(3, 300) for _ in range(6)]
        seqs += [_seq(prompt + [rng.randrange(3, 300) for _ in range(16)], 36) for _ in range(8)]
    rows = pack_rows(seqs)
    lengths = [row_length(r) for r in rows]
    assert len(rows) * max(lengths) <= 4 * (35 + 8 * 16)  # no worse than a row per group
    assert max(lengths) - min(lengths) <= 16


def test_attention_bound_keeps_long_replies_with_a_short_prompt_apart():
    prompt = list(range(3, 7))
    group = [_seq(prompt + [100 + i] * 60, 4) for i in range(4)]
    # 4 shared tokens of 63: below a tenth of each sequence, so nothing joins
    assert [len(r) for r in pack_rows(group)] == [1, 1, 1, 1]


def test_layout_puts_every_input_token_at_its_own_position():
    rng = random.Random(3)
    seqs = []
    for _ in range(3):
        prompt = [rng.randrange(3, 50) for _ in range(rng.randint(3, 9))]
        for _ in range(rng.randint(1, 5)):
            reply = [rng.randrange(3, 50) for _ in range(rng.randint(1, 6))]
            seqs.append(_seq(prompt + reply, len(prompt)))
    rows = pack_rows(seqs)
    packed = layout(rows, pad_id=0)
    members = [s for row in rows for s in row]
    flat_ids = packed.input_ids.flatten()
    flat_pos = packed.position_ids.flatten()
    for b, s in enumerate(members):
        cols = packed.index[b, : len(s.tokens) - 1]
        assert flat_ids[cols].tolist() == s.tokens[:-1]
        assert flat_pos[cols].tolist() == list(range(len(s.tokens) - 1))
        row = int(cols[0]) // packed.input_ids.shape[1]
        local = cols - row * packed.input_ids.shape[1]
        visible = packed.visible[row]
        # a position sees exactly its own sequence's earlier positions (and itself)
        for t, q in enumerate(local.tolist()):
            seen = set(visible[q].nonzero().flatten().tolist())
            own = set(local[: t + 1].tolist())
            assert own <= seen
            others = seen - own
            for k in others:  # anything else it sees is another sequence's copy of the same prefix
                assert flat_ids[row * packed.input_ids.shape[1] + k] in s.tokens[: t + 1]
    # padding rows stay valid: every row of the mask sees at least one position
    assert bool(packed.visible.any(-1).all())


@pytest.mark.parametrize(
    "loss_type,aggregation", [("grpo", "token"), ("gspo", "sequence"), ("cispo", "constant")]
)
def test_packed_steps_give_the_plain_loss_and_gradient(policy, loss_type, aggregation):
    assert prefix_sharing_check(policy) is None
    # a teacher's top-2 and reference logprobs, so every term runs packed too
    groups = with_teacher_and_reference(scripted_groups(3, group_size=4, seed=21))
    for g in groups:
        g["generation_params"] = {"temperature": 0.7}
    cfg = TrainingConfig(
        model_name="m",
        seq_len=32,
        loss_type=loss_type,
        aggregation=aggregation,
        kl_coef=0.1,
        distill_coef=0.5,
        temperature_from_groups=True,
    )
    plain, g_plain = _step(policy, groups, cfg, share=False)
    packed, g_packed = _step(policy, groups, cfg, share=True)
    assert g_plain.abs().sum() > 0
    assert torch.allclose(g_plain, g_packed, atol=1e-6, rtol=1e-4)
    assert plain["entropy_sum"] > 0
    for key in (
        "loss",
        "kl",
        "distill",
        "tokens",
        "clipped",
        "ratio_sum",
        "mismatch_kl_sum",
        "entropy_sum",
    ):
        assert packed[key] == pytest.approx(plain[key], rel=1e-5, abs=1e-6), key
    # 3 prompts of 4 tokens shared by 4 replies of 2-5: fewer tokens computed, nothing padded
    assert packed["padded_tokens"] < plain["padded_tokens"]
    assert packed["seq_tokens"] == plain["seq_tokens"]


def test_a_reference_model_runs_packed_too(policy, tiny_model):
    """Sequences without reference log-probabilities make the trainer run its reference model, which
    then takes the packed rows as well: the KL term matches the plain layout's."""
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    with torch.no_grad():  # a reference that differs from the policy, so the KL is not 0
        for p in ref.parameters():
            p.mul_(0.9)
    groups = scripted_groups(3, group_size=4, seed=8)
    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=0.5)
    plain, g_plain = _step(policy, groups, cfg, share=False, ref_model=ref)
    packed, g_packed = _step(policy, groups, cfg, share=True, ref_model=ref)
    assert plain["kl"] > 0
    assert packed["kl"] == pytest.approx(plain["kl"], rel=1e-5)
    assert torch.allclose(g_plain, g_packed, atol=1e-6, rtol=1e-4)
    assert packed["padded_tokens"] < plain["padded_tokens"]


def test_a_multi_turn_episode_shares_only_what_precedes_its_first_trained_token(policy):
    """Tool replies between assistant turns are not trained; sharing stops before the first trained
    token, so later identical turns are each sequence's own, and the gradient is the plain one."""
    rng = random.Random(5)
    prompt = [rng.randrange(3, 200) for _ in range(6)]
    tool = [rng.randrange(3, 200) for _ in range(3)]
    group = {"tokens": [], "masks": [], "scores": [], "inference_logprobs": []}
    for i in range(4):
        turn1 = [rng.randrange(3, 200) for _ in range(3)]
        turn2 = [rng.randrange(3, 200) for _ in range(2)]
        tokens = prompt + turn1 + tool + turn2
        trained = [False] * 6 + [True] * 3 + [False] * 3 + [True] * 2
        group["tokens"].append(tokens)
        group["masks"].append([t if k else -100 for t, k in zip(tokens, trained, strict=True)])
        group["scores"].append(float(i % 2))
        group["inference_logprobs"].append([-4.0] * len(tokens))
    cfg = TrainingConfig(model_name="m", seq_len=32)
    flat = flatten_batch([group], seq_len=32)
    assert {shareable_length(s) for s in flat.sequences} == {5}
    plain, g_plain = _step(policy, [group], cfg, share=False)
    packed, g_packed = _step(policy, [group], cfg, share=True)
    assert torch.allclose(g_plain, g_packed, atol=1e-6, rtol=1e-4)
    assert packed["loss"] == pytest.approx(plain["loss"], rel=1e-5)


def test_micro_batches_of_packed_rows_sum_to_the_whole_batch(policy):
    groups = scripted_groups(4, group_size=4, seed=22)
    whole = TrainingConfig(model_name="m", seq_len=32)
    split = TrainingConfig(model_name="m", seq_len=32, micro_batch_tokens=24)
    _, g_whole = _step(policy, groups, whole, share=True)
    _, g_split = _step(policy, groups, split, share=True)
    assert torch.allclose(g_whole, g_split, atol=1e-6, rtol=1e-4)


def test_the_check_refuses_a_model_that_ignores_the_positions(policy, monkeypatch):
    """A forward that drops ``position_ids`` (as some architectures' do) would train the replies at
    the wrong positions; the set-up probe sees it and keeps the plain layout."""
    assert prefix_sharing_check(policy) is None
    forward = type(policy).forward

    def no_positions(self, *args, **kwargs):
        kwargs.pop("position_ids", None)
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(type(policy), "forward", no_positions)
    reason = prefix_sharing_check(policy)
    assert reason is not None and "differ" in reason


def test_the_check_refuses_kernels_without_a_custom_mask_and_local_attention(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    model.config._attn_implementation = "flash_attention_2"
    assert "takes no custom mask" in (prefix_sharing_check(model, probe=False) or "")
    model.config._attn_implementation = "eager"
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    assert "local" in (prefix_sharing_check(model, probe=False) or "")


def test_the_trainer_shares_prefixes_only_when_its_reference_model_can_too(
    policy, tiny_model, caplog
):
    import logging

    from transformers import AutoModelForCausalLM

    from example_trainer.grpo import prefix_sharing

    cfg = TrainingConfig(model_name="m", kl_coef=0.1)
    ref = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    assert prefix_sharing(policy, cfg, DistInfo(), ref)
    ref.config._attn_implementation = "flash_attention_2"
    with caplog.at_level(logging.INFO, logger="atropos-grpo"):
        assert not prefix_sharing(policy, cfg, DistInfo(), ref)
    assert "prefix sharing: off, the reference model: its attention kernel" in caplog.text
    off = TrainingConfig(model_name="m", prefix_sharing="off")
    assert not prefix_sharing(policy, off, DistInfo())


def test_collate_order_matches_the_layout():
    """``train_step`` collates the rows' sequences in row order; the layout's index follows it."""
    seqs = [_seq([1, 2, 3, 4, 9], 4), _seq([5, 6, 7], 2), _seq([1, 2, 3, 4, 8, 8], 4)]
    rows = pack_rows(seqs)
    members = [s for row in rows for s in row]
    mb = collate(members)
    packed = layout(rows, pad_id=0)
    assert packed.index.shape == mb.input_ids.shape
    got = packed.gather(packed.input_ids.unsqueeze(-1).float())[..., 0]
    assert torch.equal(got.long() * mb.attention_mask, mb.input_ids * mb.attention_mask)

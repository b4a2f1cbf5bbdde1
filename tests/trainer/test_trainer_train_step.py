"""One optimizer step's forward/backward in-process: every loss variant runs, and splitting the batch
into micro-batches does not change the gradient (the normaliser is the whole batch's)."""

from __future__ import annotations

import math

import pytest
import torch
from _trainer_helpers import scripted_groups, with_teacher_and_reference

from example_trainer.batching import flatten_batch
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo
from example_trainer.grpo import train_step


@pytest.fixture(scope="module")
def policy(tiny_model):
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)


def _grads(model, cfg, groups, ref_model=None):
    model.zero_grad(set_to_none=True)
    flat = flatten_batch(groups, seq_len=cfg.seq_len, advantage_mode=cfg.advantage_mode)
    stats = train_step(model, ref_model, flat, cfg, DistInfo(), torch.device("cpu"), pad_id=0)
    return stats, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_micro_batching_does_not_change_the_gradient(policy):
    groups = scripted_groups(4, seed=11)
    one = TrainingConfig(model_name="m", seq_len=32, gradient_accumulation_steps=1)
    three = TrainingConfig(model_name="m", seq_len=32, gradient_accumulation_steps=3)
    budget = TrainingConfig(model_name="m", seq_len=32, micro_batch_tokens=20)
    s1, g1 = _grads(policy, one, groups)
    s3, g3 = _grads(policy, three, groups)
    sb, gb = _grads(policy, budget, groups)
    assert g1.abs().sum() > 0
    assert torch.allclose(g1, g3, atol=1e-6) and torch.allclose(g1, gb, atol=1e-6)
    assert s1["loss"] == pytest.approx(s3["loss"], abs=1e-6) and s1["tokens"] == s3["tokens"]


@pytest.mark.parametrize(
    "loss_type,aggregation", [("grpo", "token"), ("gspo", "sequence"), ("cispo", "constant")]
)
def test_every_variant_trains_with_kl_and_distillation(policy, loss_type, aggregation):
    groups = with_teacher_and_reference(scripted_groups(2, seed=12))
    cfg = TrainingConfig(
        model_name="m",
        seq_len=32,
        loss_type=loss_type,
        aggregation=aggregation,
        kl_coef=0.1,
        distill_coef=0.5,
        eps_low=0.2,
        eps_high=0.28,
    )
    stats, grad = _grads(policy, cfg, groups)
    assert all(math.isfinite(v) for v in stats.values())
    assert stats["kl"] > 0 and stats["distill"] > 0 and grad.abs().sum() > 0


def _model_logprobs(policy, tokens, temperature=1.0):
    """log pi(token_t | prefix) for t >= 1 by a plain forward: what a server reports."""
    with torch.no_grad():
        logits = policy(input_ids=torch.tensor([tokens])).logits[0, :-1].float()
        lp = torch.log_softmax(logits / temperature, -1).gather(
            -1, torch.tensor(tokens[1:])[:, None]
        )
    return [0.0] + lp[:, 0].tolist()


def test_logits_are_divided_by_the_sampling_temperature(policy):
    # a server reporting logprobs at temperature 0.7 (SGLang's default), computed independently here
    groups = scripted_groups(2, seed=13)
    for g in groups:
        g["generation_params"] = {"temperature": 0.7}
        g["inference_logprobs"] = [_model_logprobs(policy, t, 0.7) for t in g["tokens"]]
    from_groups = TrainingConfig(model_name="m", seq_len=32, temperature_from_groups=True)
    flag = TrainingConfig(model_name="m", seq_len=32, temperature=0.7)
    ignored = TrainingConfig(model_name="m", seq_len=32)
    for cfg in (from_groups, flag):
        flat = flatten_batch(
            groups,
            seq_len=32,
            temperature=cfg.temperature,
            temperature_from_groups=cfg.temperature_from_groups,
        )
        stats = train_step(policy, None, flat, cfg, DistInfo(), torch.device("cpu"), pad_id=0)
        assert stats["abs_delta_sum"] / stats["tokens"] < 1e-4
        assert stats["ratio_sum"] / stats["tokens"] == pytest.approx(1.0, abs=1e-4)
    flat = flatten_batch(groups, seq_len=32)
    stats = train_step(policy, None, flat, ignored, DistInfo(), torch.device("cpu"), pad_id=0)
    # the wrong ratio the old trainer used (this random model is near-uniform, so the gap is small)
    assert stats["abs_delta_sum"] / stats["tokens"] > 0.01


def test_sequence_aggregation_kl_in_a_step_is_the_mean_of_per_sequence_means(policy):
    groups = scripted_groups(2, seed=14)
    for g in groups:
        g["ref_logprobs"] = [[-3.0] * len(t) for t in g["tokens"]]
    cfg = TrainingConfig(model_name="m", seq_len=32, aggregation="sequence", kl_coef=1.0)
    flat = flatten_batch(groups, seq_len=32)
    stats = train_step(policy, None, flat, cfg, DistInfo(), torch.device("cpu"), pad_id=0)
    means = []
    for s in flat.sequences:
        lp = torch.tensor(_model_logprobs(policy, s.tokens))
        d = (-3.0 - lp)[1:][torch.tensor(s.trained[1:])]
        means.append(float((torch.exp(d) - d - 1).mean()))
    assert stats["kl"] == pytest.approx(sum(means) / len(means), rel=1e-4)


def _with_all_equal_groups(groups, n_equal):
    """The first ``n_equal`` groups get scores that all agree (advantages exactly 0)."""
    for g in groups[:n_equal]:
        g["scores"] = [1.0] * len(g["scores"])
    return groups


@pytest.mark.parametrize("share_prefix", [False, True])
def test_zero_advantage_sequences_are_skipped_and_the_gradient_is_the_same(policy, share_prefix):
    groups = _with_all_equal_groups(scripted_groups(3, seed=15), 2)
    skip = TrainingConfig(model_name="m", seq_len=32)
    full = TrainingConfig(model_name="m", seq_len=32, skip_zero_advantage=False)
    flat = flatten_batch(groups, seq_len=32)
    n_all = sum(sum(s.trained[1:]) for s in flat.sequences)
    n_informative = sum(sum(s.trained[1:]) for s in flat.sequences[8:])

    def run(cfg):
        policy.zero_grad(set_to_none=True)
        stats = train_step(
            policy, None, flat, cfg, DistInfo(), torch.device("cpu"), 0, share_prefix=share_prefix
        )
        return stats, [p.grad.clone() for p in policy.parameters()]

    s_skip, g_skip = run(skip)
    s_full, g_full = run(full)
    assert s_skip["zero_advantage_seqs"] == 8 and s_full["zero_advantage_seqs"] == 0
    assert s_skip["tokens"] == n_informative and s_full["tokens"] == n_all
    assert s_skip["zero_advantage_tokens"] == n_all - n_informative
    assert s_skip["padded_tokens"] < s_full["padded_tokens"]  # the forward ran on less
    assert any(g.abs().sum() > 0 for g in g_full)
    for a, b in zip(g_skip, g_full, strict=True):
        assert torch.allclose(a, b, atol=1e-7, rtol=1e-5)
    assert s_skip["loss"] == pytest.approx(s_full["loss"], abs=1e-7)


def test_a_batch_with_no_gradient_still_steps_the_optimizer_as_the_full_pass_does(tiny_model):
    from transformers import AutoModelForCausalLM

    first = scripted_groups(2, seed=16)
    dead = _with_all_equal_groups(scripted_groups(2, seed=17), 2)
    params_after = []
    for skip in (True, False):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        cfg = TrainingConfig(model_name="m", seq_len=32, skip_zero_advantage=skip)
        stats = {}
        for groups in (first, dead):
            opt.zero_grad(set_to_none=True)
            flat = flatten_batch(groups, seq_len=32)
            stats = train_step(model, None, flat, cfg, DistInfo(), torch.device("cpu"), 0)
            assert all(p.grad is not None for p in model.parameters())
            opt.step()
        if skip:  # the dead step ran only the one-token zero-loss pass
            assert stats["zero_advantage_seqs"] == 8 and stats["padded_tokens"] == 0
        else:
            assert stats["zero_advantage_seqs"] == 0 and stats["padded_tokens"] > 0
        params_after.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*params_after, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_nothing_is_skipped_when_a_kl_term_is_on(policy):
    groups = _with_all_equal_groups(scripted_groups(2, seed=18), 2)
    for g in groups:
        g["ref_logprobs"] = [[-3.0] * len(t) for t in g["tokens"]]
    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=0.5)
    stats, grad = _grads(policy, cfg, groups)
    assert stats["zero_advantage_seqs"] == 0 and stats["kl"] > 0 and grad.abs().sum() > 0

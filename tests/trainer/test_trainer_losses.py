"""Each loss against values computed by hand on tiny tensors (clip, TIS, aggregation, masking)."""

from __future__ import annotations

import math

import pytest
import torch

from example_trainer.losses import (
    distill_from_logprobs,
    distill_loss,
    group_advantages,
    kl_k3,
    normaliser_for,
    policy_loss,
    sequence_weights,
    shuffled_scores,
)


def _lp(*probs: float) -> torch.Tensor:
    return torch.tensor([[math.log(p) for p in probs]], dtype=torch.float64, requires_grad=True)


def _inf(*probs: float) -> torch.Tensor:
    return torch.tensor([[math.log(p) for p in probs]], dtype=torch.float64)


def test_group_advantages_grpo_mean_only_and_constant_group():
    assert group_advantages([1, 0, 0, 1]) == pytest.approx([1, -1, -1, 1], abs=1e-5)
    assert group_advantages([1, 0, 0, 1], "mean_only") == pytest.approx([0.5, -0.5, -0.5, 0.5])
    assert group_advantages([0.3, 0.3, 0.3]) == pytest.approx([0, 0, 0])
    with pytest.raises(ValueError, match="advantage_mode"):
        group_advantages([1.0], "bogus")


def test_shuffled_scores_is_a_permutation():
    g = torch.Generator().manual_seed(0)
    scores = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    out = shuffled_scores(scores, g)
    assert sorted(out) == scores and out != scores


def test_grpo_clips_asymmetrically_against_inference_logprobs():
    # ratios 1.0, 1.8, 0.2 with advantages +1, +1, -1
    lp = _lp(0.5, 0.9, 0.1)
    parts = policy_loss(
        lp,
        _inf(0.5, 0.5, 0.5),
        torch.tensor([[1.0, 1.0, -1.0]]),
        torch.ones(1, 3),
        eps_low=0.2,
        eps_high=0.28,
        tis_cap=2.0,
    )
    # objective: min(1,1)=1 ; min(1.8, 1.28)=1.28 ; min(-0.2, -0.8)=-0.8
    assert parts.loss_sum.item() == pytest.approx(-(1 + 1.28 - 0.8))
    assert parts.stats["clipped"] == 2 and parts.stats["tokens"] == 3
    assert parts.stats["ratio_max"] == pytest.approx(1.8) and parts.stats[
        "ratio_min"
    ] == pytest.approx(0.2)
    parts.loss_sum.backward()
    # unclipped token: d(-r*A)/dlogp = -r*A = -1 ; clipped tokens carry no gradient
    assert lp.grad[0].tolist() == pytest.approx([-1.0, 0.0, 0.0])


def test_clip_higher_lets_positive_tokens_grow_further_than_negative_ones_shrink():
    lp = _lp(0.625)  # ratio 1.25 against 0.5
    up = policy_loss(
        lp, _inf(0.5), torch.tensor([[1.0]]), torch.ones(1, 1), eps_low=0.2, eps_high=0.28
    )
    sym = policy_loss(
        lp, _inf(0.5), torch.tensor([[1.0]]), torch.ones(1, 1), eps_low=0.2, eps_high=0.2
    )
    assert up.stats["clipped"] == 0 and up.loss_sum.item() == pytest.approx(-1.25)
    assert sym.stats["clipped"] == 1 and sym.loss_sum.item() == pytest.approx(-1.2)


def test_tis_truncates_the_unclipped_branch_of_negative_advantages():
    # ratio 3 with A = -1: the PPO min keeps the unclipped branch -3; TIS caps its weight at 2
    lp = _lp(0.6)
    with_tis = policy_loss(lp, _inf(0.2), torch.tensor([[-1.0]]), torch.ones(1, 1), tis_cap=2.0)
    assert with_tis.loss_sum.item() == pytest.approx(2.0)
    with_tis.loss_sum.backward()
    assert lp.grad.item() == pytest.approx(2.0)
    lp2 = _lp(0.6)
    no_tis = policy_loss(lp2, _inf(0.2), torch.tensor([[-1.0]]), torch.ones(1, 1), tis_cap=0.0)
    assert no_tis.loss_sum.item() == pytest.approx(3.0)
    no_tis.loss_sum.backward()
    assert lp2.grad.item() == pytest.approx(3.0)


def test_masked_tokens_contribute_nothing_even_with_wild_logprobs():
    lp = _lp(0.5, 0.5)
    inf = torch.tensor(
        [[math.log(0.5), -500.0]], dtype=torch.float64
    )  # garbage at the prompt position
    parts = policy_loss(lp, inf, torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 0.0]]))
    assert parts.loss_sum.item() == pytest.approx(-1.0)
    assert parts.stats["tokens"] == 1 and parts.stats["abs_delta_sum"] == 0
    parts.loss_sum.backward()
    assert lp.grad[0].tolist() == pytest.approx([-1.0, 0.0])


def test_on_policy_without_inference_logprobs_is_reinforce():
    lp = _lp(0.3, 0.7)
    parts = policy_loss(lp, None, torch.tensor([[2.0, -1.0]]), torch.ones(1, 2))
    assert parts.loss_sum.item() == pytest.approx(-(2.0 - 1.0))
    parts.loss_sum.backward()
    assert lp.grad[0].tolist() == pytest.approx([-2.0, 1.0])


def test_gspo_uses_one_sequence_ratio():
    lp = _lp(0.55, 0.65)  # per-token ratios 1.1 and 1.3 against 0.5
    s = math.sqrt(1.1 * 1.3)
    parts = policy_loss(
        lp,
        _inf(0.5, 0.5),
        torch.ones(1, 2),
        torch.ones(1, 2),
        loss_type="gspo",
        eps_low=0.2,
        eps_high=0.28,
    )
    assert parts.loss_sum.item() == pytest.approx(-2 * s)
    parts.loss_sum.backward()
    assert lp.grad[0].tolist() == pytest.approx([-s, -s])
    lp2 = _lp(0.55, 0.65)
    clipped = policy_loss(
        lp2,
        _inf(0.5, 0.5),
        torch.ones(1, 2),
        torch.ones(1, 2),
        loss_type="gspo",
        eps_low=0.1,
        eps_high=0.1,
    )
    assert clipped.loss_sum.item() == pytest.approx(-2 * 1.1) and clipped.stats["clipped"] == 2


def test_cispo_clips_the_weight_but_keeps_the_gradient():
    lp = _lp(0.9)  # ratio 1.8
    parts = policy_loss(
        lp,
        _inf(0.5),
        torch.ones(1, 1),
        torch.ones(1, 1),
        loss_type="cispo",
        eps_low=0.2,
        eps_high=0.28,
    )
    assert parts.loss_sum.item() == pytest.approx(-1.28 * math.log(0.9))
    parts.loss_sum.backward()
    assert lp.grad.item() == pytest.approx(-1.28)


def test_token_versus_sequence_aggregation():
    # seq 0: two trained tokens with A=+1 ; seq 1: one trained token with A=-1 (on-policy: objective = A)
    lp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]], dtype=torch.float64)
    tok = policy_loss(lp, None, adv, mask).loss_sum / normaliser_for("token", 3, 2, 3)
    seq = policy_loss(
        lp, None, adv, mask, weights=sequence_weights(mask)
    ).loss_sum / normaliser_for("sequence", 3, 2, 3)
    const = policy_loss(lp, None, adv, mask).loss_sum / normaliser_for("constant", 3, 2, 3)
    assert tok.item() == pytest.approx(-1 / 3)
    assert seq.item() == pytest.approx(0.0)
    assert const.item() == pytest.approx(-1 / 6)


def test_mismatch_kl_estimate():
    lp = _lp(0.5)
    parts = policy_loss(lp, _inf(0.25), torch.zeros(1, 1), torch.ones(1, 1))
    d = math.log(2)
    assert parts.stats["abs_delta_sum"] == pytest.approx(d)
    assert parts.stats["mismatch_kl_sum"] == pytest.approx(math.exp(d) - d - 1)


def test_kl_k3_against_reference():
    lp = _lp(0.5)
    v = kl_k3(lp, _inf(0.25), torch.ones(1, 1))
    assert v.item() == pytest.approx(0.5 + math.log(2) - 1)
    assert kl_k3(lp, _inf(0.5), torch.ones(1, 1)).item() == pytest.approx(0.0)


def test_distillation_cross_entropy_on_teacher_top_k_with_padding():
    logits = torch.zeros(1, 1, 3)  # uniform student: log pi = log 1/3 everywhere
    ids = torch.tensor([[[0, 1, -1]]])
    lps = torch.tensor([[[math.log(0.75), math.log(0.25), 0.0]]])
    v = distill_loss(logits, ids, lps, torch.ones(1, 1))
    assert v.item() == pytest.approx(math.log(3), rel=1e-5)
    assert distill_loss(logits, ids, lps, torch.zeros(1, 1)).item() == 0.0


def test_sequence_aggregation_kl_is_a_per_sequence_mean_like_the_policy_term():
    # seq 0: one trained token with ref - logp = ln 2 ; seq 1: three trained tokens, d = 0, 0, ln 2
    # k3(ln 2) = 2 - ln 2 - 1 = 1 - ln 2 ; per-sequence means: (1 - ln 2) and (1 - ln 2) / 3
    lp = torch.log(torch.tensor([[0.25, 0.5, 0.5], [0.5, 0.5, 0.25]], dtype=torch.float64))
    ref = torch.log(torch.tensor([[0.5, 0.9, 0.9], [0.5, 0.5, 0.5]], dtype=torch.float64))
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    k3 = 1 - math.log(2)
    seq = kl_k3(lp, ref, mask, sequence_weights(mask)) / normaliser_for("sequence", 4, 2, 3)
    assert seq.item() == pytest.approx((k3 + k3 / 3) / 2)
    tok = kl_k3(lp, ref, mask) / normaliser_for("token", 4, 2, 3)
    assert tok.item() == pytest.approx(2 * k3 / 4)
    # the policy term of the same batch at the same weights: on-policy, A = 1 -> -(1 + 1) / 2
    pol = policy_loss(lp, None, torch.ones_like(lp), mask, weights=sequence_weights(mask))
    assert (pol.loss_sum / 2).item() == pytest.approx(-1.0)


def test_sequence_aggregation_distillation_is_a_per_sequence_mean():
    # teacher top-2 with equal logprobs -> q = (1/2, 1/2); student log pi at the ids: ln 1/2, ln 1/4
    # per token: -(ln(1/2) + ln(1/4)) / 2 = 1.5 ln 2 ; seq 0 has 1 token, seq 1 has 3 tokens
    student = torch.log(torch.tensor([0.5, 0.25])).expand(2, 3, 2)
    ids = torch.tensor([5, 6]).expand(2, 3, 2)
    teacher = torch.full((2, 3, 2), -0.7)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    per_tok = 1.5 * math.log(2)
    seq = distill_from_logprobs(student, ids, teacher, mask, sequence_weights(mask))
    assert seq.item() == pytest.approx(2 * per_tok, rel=1e-6)  # two sequences, mean 1.5 ln 2 each
    assert distill_from_logprobs(student, ids, teacher, mask).item() == pytest.approx(
        4 * per_tok, rel=1e-6
    )
    logits = torch.full((2, 3, 10), -30.0)  # the full-vocab form agrees: ids 5/6 at 1/2, 1/4
    logits[..., 5], logits[..., 6] = math.log(0.5), math.log(0.25)
    logits[..., 0] = math.log(0.25)
    full = distill_loss(logits, ids, teacher, mask, sequence_weights(mask))
    assert full.item() == pytest.approx(2 * per_tok, rel=1e-5)


def test_a_registered_objective_is_a_loss_the_config_and_policy_loss_accept(monkeypatch):
    """A new loss is one PolicyObjective plus one registry entry: the config accepts its name and
    policy_loss computes with it (here: plain REINFORCE, objective A * logprobs)."""
    from example_trainer.config import TrainingConfig
    from example_trainer.losses.objective import ObjectiveTerms, RatioInputs
    from example_trainer.losses.registry import OBJECTIVES

    def reinforce(x: RatioInputs) -> ObjectiveTerms:
        return ObjectiveTerms(per_token=x.advantages * x.logprobs, ratio=torch.ones_like(x.delta))

    with pytest.raises(ValueError, match="must be one of grpo, gspo, cispo"):
        TrainingConfig(model_name="m", loss_type="reinforce")
    monkeypatch.setitem(OBJECTIVES, "reinforce", reinforce)
    assert TrainingConfig(model_name="m", loss_type="reinforce").loss_type == "reinforce"
    lp = _lp(0.5, 0.25)
    adv = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    parts = policy_loss(lp, None, adv, torch.ones_like(lp), loss_type="reinforce")
    assert parts.loss_sum.item() == pytest.approx(-(math.log(0.5) + 2 * math.log(0.25)))
    with pytest.raises(ValueError, match="grpo, gspo, cispo"):
        policy_loss(lp, None, adv, torch.ones_like(lp), loss_type="nope")


def test_proximal_reference_keeps_the_gradient_a_stale_sample_would_clip():
    """Decoupled PPO (the trainer's default): the clip is against the step's own start (ratio 1), and
    the sampler's staleness is a separate weight min(pi / mu, tis_cap): a token the policy already
    moved past the behaviour clip keeps its gradient, weighted, instead of losing it."""
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    inf = _inf(0.5, 0.5, 0.5)
    grads = {}
    for ref in ("behaviour", "proximal"):
        lp = _lp(0.5, 0.9, 0.1)  # ratios against mu: 1.0, 1.8, 0.2
        parts = policy_loss(
            lp,
            inf,
            adv,
            torch.ones(1, 3),
            eps_low=0.2,
            eps_high=0.28,
            tis_cap=2.0,
            clip_reference=ref,
        )
        parts.loss_sum.backward()
        grads[ref] = lp.grad[0].tolist()
        if ref == "proximal":
            # value -sum(w * A) with w = 1.0, 1.8, 0.2; no token clipped, none capped
            assert parts.loss_sum.item() == pytest.approx(-(1.0 + 1.8 - 0.2))
            assert parts.stats["clipped"] == 0 and parts.stats["capped"] == 0
            assert parts.stats["ratio_max"] == pytest.approx(1.8)
    # behaviour: the 1.8 token (A > 0, past 1.28) and the 0.2 token (A < 0, below 0.8) get nothing
    assert grads["behaviour"] == pytest.approx([-1.0, 0.0, 0.0])
    # proximal: d/dlogp of -(w * A * logp) = -w * A
    assert grads["proximal"] == pytest.approx([-1.0, -1.8, 0.2])


def test_proximal_importance_weight_is_capped_at_tis_cap():
    lp = _lp(0.9, 0.5)
    parts = policy_loss(
        lp,
        _inf(0.1, 0.5),  # ratio 9 on the first token
        torch.tensor([[1.0, 1.0]]),
        torch.ones(1, 2),
        tis_cap=2.0,
        clip_reference="proximal",
    )
    parts.loss_sum.backward()
    assert lp.grad[0].tolist() == pytest.approx([-2.0, -1.0])
    assert parts.stats["capped"] == 1
    with pytest.raises(ValueError, match="clip_reference"):
        policy_loss(lp, None, torch.ones(1, 2), torch.ones(1, 2), clip_reference="bogus")

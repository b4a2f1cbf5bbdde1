"""The chunked sampled-token log-probabilities equal the full-vocabulary path in value and gradient."""

from __future__ import annotations

import pytest
import torch

from example_trainer.batching import collate, flatten_batch
from example_trainer.logprobs import (
    chunked_logprobs,
    full_vocab_entropy,
    full_vocab_logprobs,
    sampled_token_head,
)
from example_trainer.train_step import forward_logprobs, forward_logprobs_entropy


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_equals_full_vocab_in_value_and_gradient(temperature):
    g = torch.Generator().manual_seed(0)
    n, h, v, k = 2 * 37, 16, 101, 3  # 37 positions per row: the chunk of 5 does not divide them
    hidden = torch.randn(2, 37, h, generator=g, requires_grad=True)
    weight = torch.randn(v, h, generator=g, requires_grad=True)
    bias = torch.randn(v, generator=g, requires_grad=True)
    ids = torch.randint(0, v, (2, 37, k), generator=g)
    inv_t = torch.full((2, 37), 1.0 / temperature)
    upstream = torch.randn(2, 37, k, generator=g)
    leaves = (hidden, weight, bias)

    out = chunked_logprobs(hidden, weight, ids, bias=bias, inv_temperature=inv_t, chunk_tokens=5)
    (out * upstream).sum().backward()
    grads = [x.grad.clone() for x in leaves]
    for x in leaves:
        x.grad = None
    logits = torch.nn.functional.linear(hidden, weight, bias)
    ref = full_vocab_logprobs(logits, ids, inv_t)
    (ref * upstream).sum().backward()

    assert out.shape == (2, 37, k) and out.dtype == torch.float32 and n == out.shape[0] * 37
    assert torch.allclose(out, ref, atol=1e-5)
    for got, x in zip(grads, leaves, strict=True):
        assert torch.allclose(got, x.grad, atol=1e-4, rtol=1e-4)
    # the temperature matters: without it the values differ
    if temperature != 1.0:
        plain = chunked_logprobs(hidden, weight, ids, bias=bias, chunk_tokens=5)
        assert not torch.allclose(plain, out, atol=1e-2)


def _micro_batch(temperature: float = 1.0):
    from _trainer_helpers import scripted_groups

    flat = flatten_batch(scripted_groups(2, seed=3), seq_len=32, temperature=temperature)
    return collate(flat.sequences, pad_id=0)


@pytest.fixture()
def policy(tiny_model):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_model_forward_through_the_chunked_head_matches_the_full_logits(policy, temperature):
    mb = _micro_batch(temperature)
    ids = torch.stack([mb.targets, (mb.targets + 7) % 300], dim=-1)  # sampled token + another id
    weights = torch.randn(ids.shape, generator=torch.Generator().manual_seed(1))

    def run(chunk: int):
        policy.zero_grad(set_to_none=True)
        lp = forward_logprobs(policy, mb, ids, chunk)
        (lp * weights * mb.mask.unsqueeze(-1)).sum().backward()
        return lp.detach(), [p.grad.clone() for p in policy.parameters()]

    lp_chunk, g_chunk = run(4)
    lp_full, g_full = run(0)
    trained = mb.mask > 0
    assert lp_chunk.shape == ids.shape and 0 < int(trained.sum()) < trained.numel()
    # the chunked head runs at the trained positions only: the same values there, 0 elsewhere
    assert torch.allclose(lp_chunk[trained], lp_full[trained], atol=1e-5)
    assert not lp_chunk[~trained].any() and lp_full[~trained].lt(0).all()
    for a, b in zip(g_chunk, g_full, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    # the independent computation: log_softmax of the model's own logits / T
    with torch.no_grad():
        logits = policy(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
    direct = torch.log_softmax(logits / temperature, -1).gather(-1, ids)
    assert torch.allclose(lp_chunk[trained], direct[trained], atol=1e-5)


def test_the_head_runs_only_at_the_positions_asked(policy, monkeypatch):
    """``positions``: the head's matmuls see only those rows (fewer FLOPs), the others read 0."""
    import example_trainer.logprobs as logprobs

    mb = _micro_batch()
    ids = mb.targets.unsqueeze(-1)
    trained = mb.mask > 0
    logprobs.inspect_output_head(policy)  # its probe forward is not what is counted below
    rows_seen = []
    real = logprobs.chunked_logprobs

    def counting(hidden, *args, **kwargs):
        rows_seen.append(hidden.shape[:-1])
        return real(hidden, *args, **kwargs)

    monkeypatch.setattr(logprobs, "chunked_logprobs", counting)
    with sampled_token_head(policy, ids, None, 8, trained) as swapped:
        assert swapped
        out = policy(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
    assert rows_seen == [torch.Size([int(trained.sum())])]
    assert out.shape == ids.shape
    assert not out[~trained].any() and out[trained].lt(0).all()


def test_head_is_restored_and_bf16_autocast_stays_close(policy):
    mb = _micro_batch()
    ids = mb.targets.unsqueeze(-1)
    with sampled_token_head(policy, ids, None, 8) as swapped:
        assert swapped
        assert policy(input_ids=mb.input_ids).logits.shape == ids.shape
    vocab = policy.config.vocab_size
    assert policy(input_ids=mb.input_ids).logits.shape[-1] == vocab  # the plain head is back
    assert "forward" not in vars(policy.get_output_embeddings())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp_chunk = forward_logprobs(policy, mb, ids, 8)
        lp_full = forward_logprobs(policy, mb, ids, 0)
    trained = mb.mask > 0
    assert lp_chunk.dtype == torch.float32
    assert torch.allclose(lp_chunk[trained], lp_full[trained], atol=5e-2)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_head_reports_the_entropy_of_the_tempered_distribution(policy, temperature):
    """The entropy the trainer logs (TRL logs the same quantity): -sum p log p of softmax(logits / T)
    at each trained position, from the chunked head and from the full path alike, without changing
    the log-probabilities or their gradient."""
    mb = _micro_batch(temperature)
    ids = mb.targets.unsqueeze(-1)
    trained = mb.mask > 0
    with torch.no_grad():
        logits = policy(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
    p = torch.softmax(logits.double() / temperature, -1)
    direct = -(p * p.log()).sum(-1).float()
    assert torch.allclose(full_vocab_entropy(logits, mb.inv_temperature), direct, atol=1e-4)
    for chunk in (4, 0):
        policy.zero_grad(set_to_none=True)
        lp, entropy = forward_logprobs_entropy(policy, mb, ids, chunk)
        lp.sum().backward()
        grads = [x.grad.clone() for x in policy.parameters()]
        policy.zero_grad(set_to_none=True)
        plain = forward_logprobs(policy, mb, ids, chunk)
        plain.sum().backward()
        assert entropy is not None and entropy.shape == trained.shape
        assert torch.allclose(entropy[trained], direct[trained], atol=1e-4), chunk
        assert not entropy[~trained].any()
        assert torch.equal(lp, plain)
        for a, x in zip(grads, policy.parameters(), strict=True):
            assert torch.allclose(a, x.grad, atol=1e-6)
    # a sharper distribution (lower temperature) has lower entropy: the value is not a constant
    if temperature != 1.0:
        hot = _micro_batch(1.0)
        _, e1 = forward_logprobs_entropy(policy, hot, hot.targets.unsqueeze(-1), 4)
        assert e1 is not None and float(e1[trained].mean()) > float(entropy[trained].mean())


def test_a_frozen_heads_compute_copy_follows_every_change_to_the_weight():
    """Under bf16 autocast the head's bf16 copy of a frozen weight is kept between calls; an in-place
    update or a new tensor behind the parameter must show in the next result, never the stale copy."""
    g = torch.Generator().manual_seed(4)
    hidden = torch.randn(6, 16, generator=g, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(50, 16, generator=g), requires_grad=False)
    ids = torch.randint(0, 50, (6, 1), generator=g)

    def run() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = chunked_logprobs(hidden, weight, ids, chunk_tokens=4)
        out.sum().backward()  # the backward reads the same copy
        return out.detach()

    def expected() -> torch.Tensor:
        logits = (hidden.detach().bfloat16() @ weight.detach().bfloat16().T).float()
        return full_vocab_logprobs(logits, ids)

    first = run()
    assert torch.allclose(first, expected(), atol=1e-5)
    assert torch.equal(run(), first)
    with torch.no_grad():
        weight.mul_(1.5)  # an optimizer step or a weight load writes in place
    scaled = run()
    assert not torch.allclose(scaled, first, atol=1e-3)
    assert torch.allclose(scaled, expected(), atol=1e-5)
    weight.data = torch.randn(50, 16, generator=g)  # a new tensor behind the same parameter
    assert torch.allclose(run(), expected(), atol=1e-5)


def test_the_probing_names_keep_their_old_import_path():
    """The head probing lives in ``output_head.py``; ``logprobs`` still hands out the same objects
    under the names model_setup, the benches and older code import from it."""
    import example_trainer.logprobs as logprobs
    import example_trainer.output_head as output_head

    for name in (
        "LogitTransform",
        "adopt_head_verdict",
        "head_verdict",
        "inspect_output_head",
        "output_head",
        "output_vocab_size",
    ):
        assert getattr(logprobs, name) is getattr(output_head, name), name

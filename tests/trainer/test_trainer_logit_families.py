"""The chunked log-prob head against the full-vocabulary path for every family of transformers models
that post-processes its logits after the output embedding (scale, divide, soft-cap, both, in a composite
model's ``text_config``), each a tiny random model built here; and the fallback for a post-processing the
chunked head does not reproduce (Chameleon masks its image tokens)."""

from __future__ import annotations

import logging

import pytest
import torch

from example_trainer.batching import MicroBatch
from example_trainer.logprobs import sampled_token_head
from example_trainer.output_head import inspect_output_head
from example_trainer.train_step import forward_logprobs

transformers = pytest.importorskip("transformers")

VOCAB = 97
TEXT = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    max_position_embeddings=64,
)
# Falcon-H1's mamba mixer at its default size (1024 channels, 128 heads, state 256, chunks of 256):
# transformers 5.17's PyTorch fallback (no mamba_ssm here) then asks for a 16 GiB tensor even for
# this 9-token batch (5.24's does not); sized like the rest of the tiny text model instead
FALCON_H1_MAMBA = dict(
    mamba_d_ssm=32, mamba_n_heads=4, mamba_d_head=8, mamba_d_state=16, mamba_chunk_size=16
)
VISION = dict(
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    image_size=28,
    patch_size=14,
)


def _causal(config_name: str, **extra):
    def build():
        cls = getattr(transformers, config_name, None)
        if cls is None:
            pytest.skip(f"transformers {transformers.__version__} has no {config_name}")
        return transformers.AutoModelForCausalLM.from_config(cls(**TEXT, **extra))

    return build


def _gemma4():
    cls = getattr(transformers, "Gemma4ForConditionalGeneration", None)
    if cls is None:
        pytest.skip("no Gemma4 in this transformers")
    config = transformers.Gemma4Config(
        text_config={**TEXT, "final_logit_softcapping": 3.0}, vision_config=None, audio_config=None
    )
    return cls(config)


def _paligemma():
    config = transformers.PaliGemmaConfig(
        text_config={"model_type": "gemma2", **TEXT, "final_logit_softcapping": 3.0},
        vision_config={"model_type": "siglip_vision_model", **VISION},
        projection_dim=32,
        image_token_index=VOCAB - 1,
    )
    return transformers.PaliGemmaForConditionalGeneration(config)


# family: (builder, the transform the probe must find: (scale, soft-cap), or what gives it for
# this transformers release)
FAMILIES = {
    "granite (logits / logits_scaling)": (
        _causal("GraniteConfig", logits_scaling=8.0),
        (1 / 8, None),
    ),
    "granitemoe (logits / logits_scaling)": (
        _causal("GraniteMoeConfig", logits_scaling=6.0, num_local_experts=2, num_experts_per_tok=1),
        (1 / 6, None),
    ),
    "cohere (logits * logit_scale)": (_causal("CohereConfig", logit_scale=0.25), (0.25, None)),
    "cohere2 (logits * logit_scale)": (_causal("Cohere2Config", logit_scale=0.25), (0.25, None)),
    "hyperclovax (logits * logits_scaling)": (
        _causal("HyperCLOVAXConfig", logits_scaling=0.5),
        (0.5, None),
    ),
    "falcon_h1 (logits * lm_head_multiplier)": (
        _causal("FalconH1Config", lm_head_multiplier=0.3, **FALCON_H1_MAMBA),
        (0.3, None),
    ),
    "gemma2 (final_logit_softcapping)": (
        _causal("Gemma2Config", final_logit_softcapping=3.0),
        (1.0, 3.0),
    ),
    "recurrent_gemma (logits_soft_cap)": (
        _causal("RecurrentGemmaConfig", logits_soft_cap=3.0),
        (1.0, 3.0),
    ),
    "gemma4 composite (text_config.final_logit_softcapping)": (_gemma4, (1.0, 3.0)),
    "paligemma composite (gemma2 text_config soft-cap)": (
        _paligemma,
        lambda: (1.0, 3.0 if _forward_soft_caps("PaliGemmaForConditionalGeneration") else None),
    ),
}


def _forward_soft_caps(class_name: str) -> bool:
    """Whether the installed release's ``forward`` of that class soft-caps its logits: PaliGemma's does
    in transformers 5.24 (with its text config's ``final_logit_softcapping``), not in 5.17, whose
    logits are the output embedding's, untouched. Read from the library's source, not from the
    probe under test."""
    import inspect

    forward = getattr(transformers, class_name).forward
    return "final_logit_softcapping" in inspect.getsource(forward)


def _micro_batch(temperature: float) -> tuple[MicroBatch, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    tokens = torch.randint(1, VOCAB - 1, (2, 10), generator=g)
    attn = torch.ones(2, 9, dtype=torch.long)
    attn[1, 6:] = 0  # a padded row
    mask = attn.float()
    mb = MicroBatch(
        input_ids=tokens[:, :-1],
        attention_mask=attn,
        targets=tokens[:, 1:],
        mask=mask,
        advantages=torch.ones(2, 9),
        inf_logprobs=None,
        ref_logprobs=None,
        distill_ids=None,
        distill_logprobs=None,
        inv_temperature=None if temperature == 1.0 else torch.full((2, 9), 1.0 / temperature),
    )
    ids = torch.stack([mb.targets, (mb.targets + 11) % VOCAB], dim=-1)
    return mb, ids


def _values_and_grads(model, mb, ids, chunk):
    model.zero_grad(set_to_none=True)
    lp = forward_logprobs(model, mb, ids, chunk)
    upstream = torch.randn(ids.shape, generator=torch.Generator().manual_seed(5))
    (lp * upstream * mb.mask.unsqueeze(-1)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return lp.detach(), grads


@pytest.mark.parametrize("family", list(FAMILIES))
def test_chunked_head_equals_the_full_path(family):
    build, expected = FAMILIES[family]
    scale, cap = expected() if callable(expected) else expected
    torch.manual_seed(0)
    model = build().float().train()
    transform = inspect_output_head(model)
    assert transform is not None and transform.cap == cap
    assert transform.scale == pytest.approx(scale, rel=1e-6)
    for temperature in (1.0, 0.7):
        mb, ids = _micro_batch(temperature)
        lp_chunk, g_chunk = _values_and_grads(model, mb, ids, 4)
        lp_full, g_full = _values_and_grads(model, mb, ids, 0)
        valid = mb.mask.bool()
        assert torch.allclose(lp_chunk[valid], lp_full[valid], atol=2e-5), family
        assert g_chunk.keys() == g_full.keys() and g_full
        for name, g in g_full.items():  # fp32 summation order differs: relative to the largest
            err = float((g_chunk[name] - g).abs().max())
            assert err <= 1e-5 * float(g.abs().max()) + 1e-6, (family, name, err)
    # the independent figure: log_softmax of the model's own (post-processed) logits
    mb, ids = _micro_batch(1.0)
    with torch.no_grad():
        logits = model(
            input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False
        ).logits
        direct = torch.log_softmax(logits.float(), -1).gather(-1, ids)
        lp = forward_logprobs(model, mb, ids, 4)
    assert torch.allclose(lp[mb.mask.bool()], direct[mb.mask.bool()], atol=2e-5)


def test_a_post_processing_not_reproduced_keeps_the_full_path(caplog):
    """Chameleon sets its image tokens' logits to the dtype's minimum: no scale or cap; the probe sees
    the head's output changed in place and the trainer keeps the full-vocabulary path, saying so."""
    config = transformers.ChameleonConfig(
        **TEXT, vocabulary_map={"<image>": 5, "IMGIMG1A": 7, "IMGIMG2B": 8}
    )
    torch.manual_seed(0)
    model = transformers.ChameleonForConditionalGeneration(config).float()
    with caplog.at_level(logging.WARNING, logger="example_trainer.logprobs"):
        assert inspect_output_head(model) is None
    assert "using the full-vocabulary path" in caplog.text
    mb, ids = _micro_batch(1.0)
    with sampled_token_head(model, ids, None, 4) as head:
        assert head is None  # nothing swapped
    lp_chunk, _ = _values_and_grads(model, mb, ids, 4)
    lp_full, _ = _values_and_grads(model, mb, ids, 0)
    assert torch.equal(lp_chunk, lp_full)


def test_granite_figure_from_the_issue_is_fixed():
    """The issue's Granite-shaped model: the head's log-probabilities came back divided by
    ``logits_scaling`` (chunked -0.7 against full -5.7 in the issue's run)."""
    torch.manual_seed(0)
    model = _causal("GraniteConfig", logits_scaling=8.0)().float()
    mb, ids = _micro_batch(1.0)
    with torch.no_grad():
        chunked = forward_logprobs(model, mb, ids, 4)
        full = forward_logprobs(model, mb, ids, 0)
        with sampled_token_head(model, ids, None, 4) as head:
            what_the_model_returns = model(
                input_ids=mb.input_ids, use_cache=False
            ).logits  # the old path's value
            assert head is not None and head.logprobs is not None
    trained = mb.mask.bool()  # the chunked head runs only where a loss reads it (0 elsewhere)
    assert torch.allclose(chunked[trained], full[trained], atol=2e-5)
    assert torch.allclose(what_the_model_returns, head.logprobs / 8.0)
    assert float(full[trained].mean()) < -4.0 and float(what_the_model_returns.mean()) > -1.0


@pytest.mark.parametrize("transform", [(0.5, 3.0), (2.0, None), (1.0, 30.0)])
def test_chunked_function_with_scale_and_cap_matches_the_full_computation(transform):
    """The autograd function alone, for the combined form MuseSpark/MuseGlimmer use
    (``cap * tanh(scale * z / cap)``; their tiny configs need audio/vision towers to build)."""
    from example_trainer.logprobs import chunked_logprobs, full_vocab_logprobs
    from example_trainer.output_head import LogitTransform

    t = LogitTransform(*transform)
    g = torch.Generator().manual_seed(7)
    hidden = torch.randn(2, 13, 8, generator=g, requires_grad=True)
    weight = torch.randn(41, 8, generator=g, requires_grad=True)
    ids = torch.randint(0, 41, (2, 13, 2), generator=g)
    inv_t = torch.full((2, 13), 1 / 0.7)
    upstream = torch.randn(2, 13, 2, generator=g)
    out = chunked_logprobs(hidden, weight, ids, inv_temperature=inv_t, chunk_tokens=5, transform=t)
    (out * upstream).sum().backward()
    grads = [hidden.grad.clone(), weight.grad.clone()]
    hidden.grad = weight.grad = None
    ref = full_vocab_logprobs(t.apply(hidden @ weight.T), ids, inv_t)
    (ref * upstream).sum().backward()
    assert torch.allclose(out, ref, atol=1e-5)
    for got, want in zip(grads, (hidden.grad, weight.grad), strict=True):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)

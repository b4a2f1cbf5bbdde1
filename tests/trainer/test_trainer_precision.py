"""Precision: bf16 compute over fp32 master weights learns at lr 1e-6 where pure bf16 does not; the
recipe each setting resolves to; pure bf16 only on request, with a warning."""

from __future__ import annotations

import logging

import pytest
import torch
from _trainer_helpers import scripted_groups

from atroposlib.errors import ConfigError
from example_trainer.batching import flatten_batch
from example_trainer.config import TrainingConfig, parse_config
from example_trainer.distributed import DistInfo
from example_trainer.precision import (
    autocast_context,
    fsdp_mp_policy,
    resolve_precision,
    warn_if_pure,
)
from example_trainer.train_step import train_step

CPU = torch.device("cpu")


def _changed_fraction(tiny_model, cfg: TrainingConfig, load_dtype: torch.dtype) -> float:
    """One train_step + AdamW step at cfg.lr; the fraction of weight entries that moved."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=load_dtype)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99))
    flat = flatten_batch(scripted_groups(4, seed=21), seq_len=cfg.seq_len)
    train_step(model, None, flat, cfg, DistInfo(), CPU, pad_id=0)
    assert all(p.grad.dtype == load_dtype for p in model.parameters())
    opt.step()
    moved = sum(
        int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before, strict=True)
    )
    return moved / sum(b.numel() for b in before)


def test_bf16_compute_over_fp32_masters_changes_almost_every_weight_at_lr_1e6(tiny_model):
    torch.manual_seed(0)
    mixed = TrainingConfig(model_name="m", seq_len=32, lr=1e-6, dtype="bfloat16")
    precision = resolve_precision(mixed, CPU)
    assert precision.master == torch.float32 and precision.autocast
    assert _changed_fraction(tiny_model, mixed, precision.master) > 0.99
    pure = TrainingConfig(model_name="m", seq_len=32, lr=1e-6, dtype="bfloat16", pure_bf16=True)
    precision = resolve_precision(pure, CPU)
    assert precision.master == torch.bfloat16 and not precision.autocast
    assert _changed_fraction(tiny_model, pure, precision.master) < 0.05


def test_bf16_compute_really_runs_in_bf16_and_the_loss_stays_fp32(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    ids = torch.tensor([[5, 6, 7, 8]])
    cfg = TrainingConfig(model_name="m", dtype="bfloat16")
    with autocast_context(resolve_precision(cfg, CPU), CPU):
        hidden = model.model(input_ids=ids).last_hidden_state
        bf16_logits = model.lm_head(hidden)
    assert bf16_logits.dtype == torch.bfloat16
    fp32 = TrainingConfig(model_name="m", dtype="float32")
    with autocast_context(resolve_precision(fp32, CPU), CPU):
        assert model(input_ids=ids).logits.dtype == torch.float32


def test_auto_is_fp32_on_cpu_and_fsdp_gets_a_mixed_precision_policy():
    auto = TrainingConfig(model_name="m")
    assert resolve_precision(auto, CPU).compute == torch.float32
    assert fsdp_mp_policy(resolve_precision(auto, CPU, fsdp=True)) is None
    bf16 = TrainingConfig(model_name="m", dtype="bfloat16")
    fsdp = resolve_precision(bf16, CPU, fsdp=True)
    assert fsdp.fsdp_mixed and not fsdp.autocast and fsdp.master == torch.float32
    policy = fsdp_mp_policy(fsdp)
    assert policy.param_dtype == torch.bfloat16 and policy.reduce_dtype == torch.float32
    assert "MixedPrecisionPolicy" in fsdp.describe()


def test_pure_bf16_is_an_explicit_opt_in_with_a_warning(caplog):
    with pytest.raises(ConfigError, match="pure_bf16 needs dtype bfloat16"):
        parse_config(["--model-name", "m", "--pure-bf16"])
    cfg = parse_config(["--model-name", "m", "--dtype", "bfloat16", "--pure-bf16"])
    with caplog.at_level(logging.WARNING, logger="atropos-grpo"):
        warn_if_pure(resolve_precision(cfg, CPU))
    assert "no fp32 master copy" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="atropos-grpo"):
        warn_if_pure(resolve_precision(TrainingConfig(model_name="m", dtype="bfloat16"), CPU))
    assert caplog.text == ""

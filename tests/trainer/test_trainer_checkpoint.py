"""Checkpoints hold model, optimizer, scheduler, RNG and step, and `latest` points at a complete one."""

from __future__ import annotations

import random

import torch

from example_trainer.checkpoint import load_latest, save_checkpoint, set_rng_state


def test_round_trip_and_retention(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    opt.step()
    sched.step()
    for step in (1, 2, 3):
        save_checkpoint(
            tmp_path, step, model=model, tokenizer=None, optimizer=opt, scheduler=sched, keep=2
        )
    expected_next = (random.random(), torch.rand(1).item())
    ck = load_latest(tmp_path)
    assert ck.step == 3 and ck.path.name == "step_0000003"
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == [
        "step_0000002",
        "step_0000003",
    ]
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt2.load_state_dict(ck.state["optimizer"])
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert ck.state["scheduler"]["last_epoch"] == 1
    set_rng_state(ck.state["rng"])  # RNG as it was at the last save: the same draws follow
    assert (random.random(), torch.rand(1).item()) == expected_next
    reloaded = LlamaForCausalLM.from_pretrained(ck.path)
    for a, b in zip(model.state_dict().values(), reloaded.state_dict().values(), strict=False):
        assert torch.equal(a, b)


def test_no_checkpoint_means_none(tmp_path):
    assert load_latest(tmp_path) is None

"""Where a trainer step goes: the phase timer adds up, the FLOPs estimate counts what a step computes,
and the matmul peak is a real measurement."""

from __future__ import annotations

import time

import pytest
import torch

from example_trainer.flops import matmul_peak, model_cost, step_flops
from example_trainer.step_timing import PHASES, StepTimer, breakdown, format_breakdown


def test_phases_add_up_to_the_interval_between_rows():
    timer = StepTimer()
    with timer.phase("wait"):
        time.sleep(0.03)
    with timer.phase("forward"):
        time.sleep(0.02)
    with timer.phase("forward"):  # a second micro-batch adds to the same phase
        time.sleep(0.02)
    time.sleep(0.01)  # outside every phase: "other"
    row = timer.row()
    assert set(row) == {f"time_{p}_s" for p in (*PHASES, "other", "step")} | {"trainer_cpu_s"}
    assert 0 <= row["trainer_cpu_s"] < row["time_step_s"]  # it slept: little CPU
    assert row["time_wait_s"] >= 0.03 and row["time_forward_s"] >= 0.04
    assert row["time_backward_s"] == 0.0
    assert row["time_other_s"] >= 0.01
    parts = sum(v for k, v in row.items() if k.startswith("time_") and k != "time_step_s")
    assert parts == pytest.approx(row["time_step_s"], abs=1e-6)
    # the next row starts where this one ended: nothing is counted twice
    with timer.phase("ack"):
        time.sleep(0.01)
    second = timer.row()
    assert second["time_forward_s"] == 0.0 and second["time_ack_s"] >= 0.01
    assert second["time_step_s"] < row["time_step_s"]


def test_a_phase_that_raises_is_still_charged_and_unknown_phases_are_refused():
    timer = StepTimer()
    with pytest.raises(RuntimeError), timer.phase("publish"):
        time.sleep(0.01)
        raise RuntimeError("push failed")
    assert timer.row()["time_publish_s"] >= 0.01
    with pytest.raises(KeyError, match="unknown step phase 'fwd'"), timer.phase("fwd"):
        pass


def test_breakdown_skips_start_up_and_formats_shares():
    rows = [
        {"step": 1, "time_step_s": 100.0, "time_forward_s": 1.0},  # start-up: left out
        {"step": 2, "time_step_s": 10.0, "time_forward_s": 4.0, "time_backward_s": 5.0},
        {"step": 3, "time_step_s": 12.0, "time_forward_s": 6.0, "time_backward_s": 5.0},
    ]
    for r in rows:
        r["server_load_s"] = 0.5
    b = breakdown(rows)
    assert b["steps"] == 2 and b["time_step_s"] == 11.0 and b["time_forward_s"] == 5.0
    line = format_breakdown(b)
    assert line.startswith("step 11.00 s mean over 2 steps: forward 5.00 s (45%), backward 5.00 s")
    assert "load of new weights 0.50 s" in line
    assert format_breakdown(breakdown([{"step": 1}])) == "no step-time breakdown recorded"


def _tiny_llama(tie: bool) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=100,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=tie,
    )
    return LlamaForCausalLM(cfg)


def test_model_cost_counts_matmul_weights_once_and_lora_trains_few():
    untied, tied = _tiny_llama(False), _tiny_llama(True)
    # per layer: q, k, v, o (16x16 each) + gate, up, down (16x32 each); the head 100x16
    per_layer = 4 * 16 * 16 + 3 * 16 * 32
    for model in (untied, tied):  # a tied head counts once, as the head
        cost = model_cost(model)
        assert (cost.body_params, cost.head_params) == (2 * per_layer, 100 * 16)
        assert cost.trained_matmul_params == cost.matmul_params
        assert (cost.layers, cost.hidden) == (2, 16)

    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(tied, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    cost = model_cost(lora)
    adapters = 2 * 2 * (16 * 2 + 2 * 16)  # 2 layers x (q, v) x (A: 2x16, B: 16x2)
    assert (cost.trained_body_params, cost.trained_head_params) == (adapters, 0)
    assert (cost.body_params, cost.head_params) == (2 * per_layer + adapters, 100 * 16)


def test_step_flops_is_forward_plus_backward():
    cost = model_cost(_tiny_llama(False))
    body, head = cost.body_params, cost.head_params
    # one micro-batch of 3 rows padded to 10 tokens: 30 tokens, 300 = 3 x 10^2; the head at 12 of them
    attention = 4 * 2 * 16 * 300
    body_fwd, head_fwd = 2 * body * 30 + attention, 2 * head * 12
    backward = body_fwd + 2 * body * 30 + 2 * head_fwd + 2 * head * 12  # all trained here
    assert step_flops(cost, 30, 300, head_tokens=12) == pytest.approx(
        body_fwd + head_fwd + backward
    )
    # the head at every token by default
    assert step_flops(cost, 30, 300) > step_flops(cost, 30, 300, head_tokens=12)


def test_matmul_peak_is_a_measured_rate():
    rate = matmul_peak("float32", threads=1, seconds=0.3)
    # a 2048^3 matmul is 17 GFLOP: any real CPU does it at >= 0.5 GFLOP/s and none at 10 TFLOP/s
    assert 5e8 < rate < 1e13
    on_cpu_clock = matmul_peak("float32", threads=1, seconds=0.3, cpu_clock=True)
    assert 5e8 < on_cpu_clock < 1e13
    assert torch.get_num_threads() >= 1

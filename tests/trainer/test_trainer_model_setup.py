"""Model set-up: one GPU per torchrun rank, dtype loading across transformers versions, gradient
checkpointing (same loss and gradients, less activation memory), micro-batch budget from seq_len."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from _trainer_helpers import REPO, child_env, scripted_groups

from atroposlib.errors import ConfigError
from atroposlib.utils.hf_compat import dtype_kwargs
from example_trainer.batching import flatten_batch, split_micro_batches
from example_trainer.config import TrainingConfig
from example_trainer.distributed import DistInfo
from example_trainer.model_setup import (
    enable_gradient_checkpointing,
    load_policy,
    resolve_device,
    use_gradient_checkpointing,
)
from example_trainer.train_step import train_step

TORCHRUN_RANK1 = {"WORLD_SIZE": "2", "LOCAL_RANK": "1", "RANK": "1"}


def test_each_torchrun_rank_takes_its_own_gpu():
    assert resolve_device("cuda", TORCHRUN_RANK1) == torch.device("cuda", 1)
    assert resolve_device("cuda", {"LOCAL_RANK": "0", "WORLD_SIZE": "2"}) == torch.device("cuda", 0)
    assert resolve_device("cuda", {}) == torch.device("cuda", 0)
    assert resolve_device("cuda:3", {}) == torch.device("cuda", 3)
    assert resolve_device("cpu", TORCHRUN_RANK1) == torch.device("cpu")
    with pytest.raises(ConfigError, match="every rank on GPU 0; use --device cuda"):
        resolve_device("cuda:0", TORCHRUN_RANK1)
    with pytest.raises(ConfigError, match="not a torch device"):
        resolve_device("gpu0", {})


def test_dtype_keyword_follows_the_transformers_version(tiny_model):
    assert dtype_kwargs(torch.bfloat16, "4.45.2") == {"torch_dtype": torch.bfloat16}
    assert dtype_kwargs(torch.bfloat16, "4.55.4") == {"torch_dtype": torch.bfloat16}
    assert dtype_kwargs(torch.bfloat16, "4.56.0") == {"dtype": torch.bfloat16}
    assert dtype_kwargs(torch.bfloat16, "5.0.0rc1") == {"dtype": torch.bfloat16}
    model, _ = load_policy(str(tiny_model), torch.bfloat16, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_checkpointing_defaults_on_for_cuda_only():
    assert use_gradient_checkpointing(None, torch.device("cuda", 0))
    assert not use_gradient_checkpointing(None, torch.device("cpu"))
    assert use_gradient_checkpointing(True, torch.device("cpu"))
    assert not use_gradient_checkpointing(False, torch.device("cuda", 0))


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(tiny_model):
    from transformers import AutoModelForCausalLM

    cfg = TrainingConfig(model_name="m", seq_len=32, kl_coef=0.1)
    groups = scripted_groups(3, seed=5)
    for g in groups:
        g["ref_logprobs"] = [[-4.0 for _ in t] for t in g["tokens"]]
    out = []
    for checkpointing in (False, True):
        model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).train()
        if checkpointing:
            enable_gradient_checkpointing(model)
            assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
        flat = flatten_batch(groups, seq_len=32)
        stats = train_step(model, None, flat, cfg, DistInfo(), torch.device("cpu"), 0)
        out.append((stats["loss"], torch.cat([p.grad.flatten() for p in model.parameters()])))
    assert out[0][0] == pytest.approx(out[1][0], abs=1e-6)
    assert torch.allclose(out[0][1], out[1][1], atol=1e-6)


def _step_memory(checkpointing: bool) -> float:
    """Peak RSS of one optimizer step above the weights + AdamW state (bench/trainer_memory.py's child
    process)."""
    spec = {
        "path": "chunked+ckpt" if checkpointing else "chunked",
        "chunk": 1024,
        "tokens": 2048,
        "seq_len": 512,
        "layers": 8,
        "hidden": 256,
        "intermediate": 1024,
        "heads": 4,
        "kv_heads": 4,
        "vocab": 512,
        "device": "cpu",
        "dtype": "float32",
        "threads": 1,
    }
    cmd = [sys.executable, str(REPO / "bench" / "trainer_memory.py"), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["step_mib"]


def test_gradient_checkpointing_needs_less_activation_memory():
    plain, checkpointed = _step_memory(False), _step_memory(True)
    # 8 layers x 2048 tokens: ~55 MiB of activations per layer without it. The window holds the whole
    # step (gradients and AdamW's update too, the same with or without checkpointing): measured
    # ~460 vs ~280 MiB, so the saving is ~40% of the step's memory
    assert checkpointed < 0.7 * plain, (plain, checkpointed)


def test_micro_batch_budget_is_sized_from_seq_len():
    assert TrainingConfig(model_name="m", seq_len=2048).resolved_micro_batch_tokens() == 16384
    assert TrainingConfig(model_name="m", seq_len=3000).resolved_micro_batch_tokens() == 15000
    assert TrainingConfig(model_name="m", seq_len=32768).resolved_micro_batch_tokens() == 32768
    explicit = TrainingConfig(model_name="m", seq_len=2048, micro_batch_tokens=0)
    assert explicit.resolved_micro_batch_tokens() == 0
    counted = TrainingConfig(model_name="m", seq_len=2048, gradient_accumulation_steps=4)
    assert counted.resolved_micro_batch_tokens() == 0
    # 32 sequences of 2048 tokens: the default budget cuts them into 4 micro-batches of 8
    long = [
        {"tokens": [[1] * 2048] * 8, "masks": [[1] * 2048] * 8, "scores": [0.0, 1.0] * 4}
        for _ in range(4)
    ]
    flat = flatten_batch(long, seq_len=2048)
    cfg = TrainingConfig(model_name="m", seq_len=2048)
    micro = split_micro_batches(flat.sequences, max_tokens=cfg.resolved_micro_batch_tokens())
    assert [len(m) for m in micro] == [8, 8, 8, 8]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_trainer_refuses_cuda_on_a_machine_without_it_in_one_line(tiny_model, tmp_path):
    proc = subprocess.run(
        [
            sys.executable, "-m", "example_trainer.grpo", "--model-name", str(tiny_model),
            "--device", "cuda", "--save-path", str(tmp_path / "out"),
        ],
        capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "atropos-grpo: error: device: cuda:0 requested but torch.cuda.is_available() is False"
    )
    assert "Traceback" not in proc.stderr


def test_attention_kernel_auto_is_eager_only_for_bf16_on_cpu(tiny_model):
    from transformers import AutoModelForCausalLM

    from example_trainer.model_setup import attention_kernel, set_attention

    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert attention_kernel("auto", cpu, torch.bfloat16) == "eager"
    assert attention_kernel("auto", cpu, torch.float32) is None
    assert attention_kernel("auto", gpu, torch.bfloat16) is None
    assert attention_kernel("sdpa", cpu, torch.bfloat16) == "sdpa"
    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa")
    set_attention(model, "eager")
    assert model.config._attn_implementation == "eager"
    with pytest.raises(ConfigError, match="attn_implementation 'no-such-kernel'"):
        set_attention(model, "no-such-kernel")

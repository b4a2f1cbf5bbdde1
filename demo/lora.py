"""What every LoRA-through-vLLM preset shares: the base model served by vLLM with runtime LoRA
loading, the trainer's adapter (on every linear layer) hot-loaded into it after every step
(``--weight-refresh lora``: a 135M model's adapter is a few MB, its full weights 540 MB), and bf16
compute on the CPU."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from demo.common_sections import run_trainer_flags

ADAPTER_NAME = "policy"  # what the env asks vLLM for: the trainer's adapter, replaced every step
BASE_NAME = "smollm2-base"
LORA_RANK = 16
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TRAINER_DTYPE = "bfloat16"  # the trainer's compute dtype (--dtype): bf16 over fp32 masters
# vLLM may swap adapters at run time; one OpenMP thread for every process whose threads are not placed
# (the trainer's --torch-threads, vLLM's workers are): vLLM's scheduler and the env otherwise spin-wait
# on cores the trainer and the workers need (vLLM warns about it)
LORA_ENV_VARS = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "OMP_NUM_THREADS": "1"}


def vllm_with_lora(model: str, max_model_len: int) -> dict[str, Any]:
    """The topology's vLLM server for a LoRA preset: the base model served as ``BASE_NAME``, the
    trainer's adapter (``ADAPTER_NAME``, rank ``LORA_RANK``) hot-loaded into it after every step."""
    return {
        "name": "vllm",
        "kind": "vllm",
        "model": model,
        "served_name": BASE_NAME,
        "args": [
            "--max-model-len",
            str(max_model_len),
            "--enable-lora",
            "--max-lora-rank",
            str(LORA_RANK),
            # log-probabilities of the distribution sampled from (after temperature), which the
            # trainer's own (logits / each group's temperature) are compared with
            "--logprobs-mode",
            "processed_logprobs",
        ],
    }


LORA_FIELDS: dict[str, Any] = {
    "weight_refresh": "lora",
    "lora_rank": LORA_RANK,
    "lora_alpha": 2 * LORA_RANK,
    "lora_target_modules": LORA_MODULES,
}
"""The adapter the LoRA presets train (on every linear layer), as trainer config fields."""


def lora_trainer_flags(
    args: argparse.Namespace, model: str, out: Path, seq_len: int
) -> dict[str, Any]:
    """The trainer flags of a LoRA preset: the run's own (``run_trainer_flags``), the adapter on every
    linear layer, published to vLLM after every step, bf16 compute on the CPU."""
    return {
        **run_trainer_flags(args, model, out, seq_len),
        **LORA_FIELDS,
        "lora_adapter_name": ADAPTER_NAME,
        "dtype": TRAINER_DTYPE,
        # vLLM reports the sampled distribution's log-probabilities (--logprobs-mode above): the
        # trainer divides its logits by the temperature each group was sampled at
        "temperature_from_groups": True,
    }

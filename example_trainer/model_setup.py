"""Setting up the models the trainer holds: device, loading, gradient checkpointing, reference model.

* ``resolve_device``: under ``torchrun`` each process owns one GPU, ``cuda:LOCAL_RANK``; ``--device cuda``
  and ``auto`` pick it, and an explicit ``cuda:N`` with more than one rank is refused (it would put every
  rank on the same GPU).
* ``load_policy``: a HF folder in the master dtype (``dtype=`` or ``torch_dtype=`` as the installed
  transformers expects), moved to the device; a bad path is a ``ModelLoadError``.
* ``use_gradient_checkpointing``/``enable_gradient_checkpointing``: on by default on CUDA; each decoder
  layer's activations are recomputed in backward (non-reentrant ``torch.utils.checkpoint``), so
  activation memory is one layer's plus each layer's input instead of every layer's.
* ``pin_cpu_cores``: ``--cpu-cores`` keeps the trainer on some cores, e.g. beside an inference server pinned
  to the others.
* ``load_reference``: the frozen KL reference, stored in the compute dtype (it needs no master copy)
  and sharded with FSDP2 exactly like the policy under ``--parallel fsdp``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Optional

import torch

from atroposlib.errors import ConfigError, ModelLoadError
from atroposlib.utils.hf_compat import dtype_kwargs
from example_trainer.distributed import DistInfo, shard_model
from example_trainer.logprobs import inspect_output_head
from example_trainer.precision import Precision

log = logging.getLogger("atropos-grpo")


def pin_cpu_cores(cores: list[int]) -> None:
    """Pin this process (and the threads it starts) to ``cores`` (checked against the cores this
    process may run on when the config is parsed)."""
    if not cores:
        return
    os.sched_setaffinity(0, set(cores))
    log.info("pinned to CPU core(s) %s", ", ".join(map(str, sorted(set(cores)))))


def resolve_device(name: str, env: Optional[Mapping[str, str]] = None) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` -> the device of this process (see the module doc)."""
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1") or 1)
    local = int(env.get("LOCAL_RANK", "0") or 0)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise ConfigError(f"device: not a torch device: {name!r}") from e
    if dev.type != "cuda":
        return dev
    if dev.index is None:
        return torch.device("cuda", local if world > 1 else 0)
    if world > 1:
        raise ConfigError(
            f"device: --device {name} under torchrun with {world} ranks would put every rank on "
            f"GPU {dev.index}; use --device cuda (each rank takes cuda:LOCAL_RANK)"
        )
    return dev


def check_device(device: torch.device) -> None:
    """Refuse, with one line, a CUDA device this machine does not have."""
    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        raise ConfigError(f"device: {device} requested but torch.cuda.is_available() is False")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(f"device: {device} requested; {torch.cuda.device_count()} GPU(s) visible")


def load_policy(path: str, dtype: torch.dtype, device: torch.device) -> tuple[Any, Any]:
    """Load a causal LM in ``dtype`` onto ``device`` and its tokenizer from a HF folder or id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(path, **dtype_kwargs(dtype))
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:  # missing folder, bad hub id, not a causal LM: user input
        lines = str(e).strip().splitlines()
        reason = lines[0] if lines else type(e).__name__
        raise ModelLoadError(f"cannot load the model {path!r}: {reason}") from e
    return model.to(device), tokenizer


def attention_kernel(choice: str, device: torch.device, compute: torch.dtype) -> Optional[str]:
    """The attention implementation to train with: ``auto`` -> eager on a CPU computing in bfloat16
    (there PyTorch's SDPA backward costs several times eager's bf16 matmuls: SmolLM2 + LoRA, 32
    sequences of ~53 tokens, one thread: 7.35 CPU-s per step with SDPA, 5.41 with eager, 10.84 in
    fp32), None (the model's own) elsewhere; any other value as given."""
    if choice != "auto":
        return choice
    return "eager" if device.type == "cpu" and compute == torch.bfloat16 else None


def set_attention(model: Any, kernel: Optional[str]) -> None:
    """Switch a loaded transformers model to ``kernel`` (None: leave it); an unknown or unsupported
    name is a ``ConfigError``."""
    if kernel is None or getattr(model.config, "_attn_implementation", None) == kernel:
        return
    try:
        model.set_attn_implementation(kernel)
    except (ValueError, ImportError, AttributeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"attn_implementation {kernel!r}: {reason}") from None
    log.info("attention: %s", kernel)


def use_gradient_checkpointing(flag: Optional[bool], device: torch.device) -> bool:
    """The ``gradient_checkpointing`` setting: unset = on for CUDA, off elsewhere."""
    return device.type == "cuda" if flag is None else flag


def enable_gradient_checkpointing(model: Any) -> None:
    """Non-reentrant activation checkpointing of every decoder layer (HF's own switch)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"gradient_checkpointing: {type(model).__name__} does not support it; "
            "pass --no-gradient-checkpointing"
        )
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # its name from transformers 5.x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def load_reference(
    path: str,
    precision: Precision,
    device: torch.device,
    info: DistInfo,
    parallel: str,
) -> torch.nn.Module:
    """The frozen reference model for the KL term, in the compute dtype, sharded like the policy."""
    ref, _ = load_policy(path, precision.compute, device)
    ref.eval().requires_grad_(False)
    inspect_output_head(ref)  # the chunked head's probe, before sharding makes it a collective
    if info.enabled and parallel == "fsdp":
        shard_model(ref, info, device)
        log.info("reference model sharded with FSDP2 over %d ranks", info.world_size)
    return ref

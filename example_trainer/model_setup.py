"""Setting up the models the trainer holds: device, loading, gradient checkpointing, reference model.

* ``resolve_device``: under ``torchrun`` each process owns one GPU, ``cuda:LOCAL_RANK``; ``--device cuda``
  and ``auto`` pick it, and an explicit ``cuda:N`` with more than one rank is refused (it would put every
  rank on the same GPU).
* ``load_policy``: a HF folder in the master dtype (``dtype=`` or ``torch_dtype=`` as the installed
  transformers expects), moved to the device; a bad path is a ``ModelLoadError``.
* ``use_gradient_checkpointing``/``enable_gradient_checkpointing``: on by default on CUDA; each decoder
  layer's activations are recomputed in backward (non-reentrant ``torch.utils.checkpoint``), so
  activation memory is one layer's plus each layer's input instead of every layer's.
* ``load_sharded_policy`` (``--parallel fsdp``): every rank builds the model with its parameters on the
  meta device (no memory), FSDP2 shards that, and rank 0, the only one to read the weights (into host
  memory), hands each rank its shard (``PendingWeights.load_into``): no rank ever holds the whole
  model on its GPU, so the largest trainable model grows with the number of GPUs.
* ``pin_cpu_cores``: ``--cpu-cores`` keeps the trainer on some cores, e.g. beside an inference server pinned
  to the others.
* ``load_reference``: the frozen KL reference, stored in the compute dtype (it needs no master copy)
  and sharded with FSDP2 exactly like the policy under ``--parallel fsdp``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import torch

from atroposlib.errors import ConfigError, ModelLoadError
from atroposlib.utils.hf_compat import dtype_kwargs
from example_trainer.distributed import DistInfo, broadcast_object, shard_model
from example_trainer.output_head import adopt_head_verdict, head_verdict, inspect_output_head
from example_trainer.precision import Precision

log = logging.getLogger("atropos-grpo")


def pin_cpu_cores(cores: list[int]) -> None:
    """Pin this process (and the threads it starts) to ``cores`` (checked against the machine's cores
    when the config is parsed; a core its cgroup withholds is a ``ConfigError`` here)."""
    if not cores:
        return
    try:
        os.sched_setaffinity(0, set(cores))
    except OSError as e:  # a core outside the cgroup's cpuset
        raise ConfigError(
            f"cpu_cores: cannot pin the trainer to core(s) {', '.join(map(str, cores))}: {e.strerror}"
        ) from None
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


@contextlib.contextmanager
def _loading(path: str) -> Iterator[None]:
    """A missing folder, a bad hub id or not a causal LM is the user's input: one line."""
    try:
        yield
    except (OSError, ValueError) as e:
        lines = str(e).strip().splitlines()
        reason = lines[0] if lines else type(e).__name__
        raise ModelLoadError(f"cannot load the model {path!r}: {reason}") from e


def load_policy(path: str, dtype: torch.dtype, device: torch.device) -> tuple[Any, Any]:
    """Load a causal LM in ``dtype`` onto ``device`` and its tokenizer from a HF folder or id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _loading(path):
        model = AutoModelForCausalLM.from_pretrained(path, **dtype_kwargs(dtype))
        tokenizer = AutoTokenizer.from_pretrained(path)
    return model.to(device), tokenizer


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Modules built inside get their parameters on the meta device (no storage) and keep real
    buffers (the rotary embedding's ``inv_freq``, computed from the config and not in the weights'
    files). Each parameter is created, then moved to meta as it is registered: one at a time."""
    original = torch.nn.Module.register_parameter

    def register(module: torch.nn.Module, name: str, param: Any) -> None:
        original(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = register  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original  # type: ignore[method-assign]


class PendingWeights:
    """Weights still to be put into the (wrapped) model: none for a model loaded whole."""

    def load_into(self, model: torch.nn.Module, device: torch.device) -> None:
        """Called once DDP/FSDP wrapped the model."""


@dataclass
class RankZeroWeights(PendingWeights):
    """Weights read once, on rank 0, to be put into the sharded model once FSDP2 has sharded it
    (``load_into``); the other ranks hold nothing. ``buffers``: every rank's own (real) buffers,
    put back after ``to_empty`` (which leaves every tensor uninitialised)."""

    is_main: bool
    full_state: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    saved_buffers: frozenset[str] = frozenset()  # buffers the weights' files hold (persistent)

    def load_into(self, model: torch.nn.Module, device: torch.device) -> None:
        """Give every rank its shard, one parameter at a time: rank 0 scatters each (``distribute_tensor``
        over the parameter's mesh and placements, as FSDP2 laid it out), so no rank holds more than
        its shards plus one whole parameter. (``set_model_state_dict(broadcast_from_rank0=True)``
        keeps every received tensor until the end: the whole model on every rank.)"""
        from torch.distributed.tensor import DTensor, Replicate, distribute_tensor

        model.to_empty(device=device)
        main = self.is_main
        with torch.no_grad():
            for name, buf in model.named_buffers():
                if name in self.buffers:  # this rank's own, computed from the config
                    buf.copy_(self.buffers[name])
            for name, param in model.named_parameters():  # tied weights once
                if not isinstance(param, DTensor):
                    raise ConfigError(f"FSDP: parameter {name} was not sharded")
                source = (
                    self.full_state[name]
                    if main
                    else torch.empty(param.shape, dtype=param.dtype, device=device)
                )
                shard = distribute_tensor(source.to(device), param.device_mesh, param.placements)
                param.to_local().copy_(shard.to_local())
                del source, shard
            mesh = next(p.device_mesh for p in model.parameters() if isinstance(p, DTensor))
            for name, buf in model.named_buffers():  # persistent buffers: the checkpoint's values
                if name in self.saved_buffers:
                    source = self.full_state[name] if main else torch.empty_like(buf)
                    buf.copy_(distribute_tensor(source.to(device), mesh, [Replicate()]).to_local())
        self.full_state = {}  # rank 0's host copy is no longer needed


def load_policy_for_training(
    path: str,
    dtype: torch.dtype,
    device: torch.device,
    info: DistInfo,
    sharded: bool,
    probe_head: bool,
) -> tuple[Any, Any, PendingWeights]:
    """The policy as the trainer sets it up: whole on ``device`` (one process, DDP), or built on the
    meta device for FSDP2 (``sharded``) with its weights pending until sharding. ``probe_head``:
    inspect the output head for the chunked log-probs, before any wrapper makes a forward a
    collective."""
    if sharded:
        return load_sharded_policy(path, dtype, info, probe_head)
    model, tokenizer = load_policy(path, dtype, device)
    if probe_head:
        inspect_output_head(model)
    return model, tokenizer, PendingWeights()


def load_sharded_policy(
    path: str, dtype: torch.dtype, info: DistInfo, probe_head: bool
) -> tuple[Any, Any, RankZeroWeights]:
    """FSDP: the model with its parameters on the meta device, on every rank; rank 0 alone reads the
    weights (in host memory) for ``PendingWeights.load_into`` after sharding, so no rank ever holds
    the whole model on its GPU. ``probe_head``: rank 0 inspects the output head (the chunked
    log-probs' probe forward needs real weights) and every rank adopts its verdict."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    with _loading(path):
        config = AutoConfig.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        with parameters_on_meta():
            model = AutoModelForCausalLM.from_config(config, **dtype_kwargs(dtype))
        full: dict[str, torch.Tensor] = {}
        verdict: Any = None
        if info.is_main:
            loaded = AutoModelForCausalLM.from_pretrained(path, **dtype_kwargs(dtype))
            if probe_head:
                verdict = head_verdict(loaded)
            full = loaded.state_dict()
            del loaded
    if probe_head:
        adopt_head_verdict(model, broadcast_object(verdict, info))
    buffers = {name: buf.detach().clone() for name, buf in model.named_buffers()}
    saved = frozenset(broadcast_object([n for n in buffers if n in full], info))
    if info.is_main:
        log.info(
            "FSDP: %s built on the meta device on every rank; rank 0 read its weights once "
            "(%.1f MiB) and shares them out after sharding",
            type(model).__name__,
            sum(t.numel() * t.element_size() for t in full.values()) / 2**20,
        )
    return (
        model,
        tokenizer,
        RankZeroWeights(
            is_main=info.is_main, full_state=full, buffers=buffers, saved_buffers=saved
        ),
    )


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
    """The frozen reference model for the KL term, in the compute dtype, sharded like the policy
    (under FSDP built on the meta device and loaded from rank 0, like the policy)."""
    if info.enabled and parallel == "fsdp":
        ref, _, pending = load_sharded_policy(path, precision.compute, info, probe_head=True)
        ref.eval().requires_grad_(False)
        shard_model(ref, info, device)
        pending.load_into(ref, device)
        log.info("reference model sharded with FSDP2 over %d ranks", info.world_size)
        return ref
    ref, _ = load_policy(path, precision.compute, device)
    ref.eval().requires_grad_(False)
    inspect_output_head(ref)  # the chunked head's probe, before sharding makes it a collective
    return ref

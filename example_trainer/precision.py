"""Numeric precision of the trainer: which dtype the weights live in and which dtype they compute in.

The standard mixed-precision recipe: **fp32 master weights and optimizer state, bf16 compute**.

* single device or DDP: the model is loaded in fp32 and every forward runs under
  ``torch.autocast(device, bfloat16)`` (matmuls in bf16, reductions and the loss in fp32); gradients,
  AdamW's moments and the update stay fp32, so an update of 1e-6 on a weight of 0.02 is not rounded
  away (bf16 has 8 significant bits: the smallest change it can represent there is ~1e-4);
* ``--parallel fsdp``: FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``: the fp32
  shards are cast to bf16 when all-gathered for compute and gradients are reduced in fp32 into the fp32
  shards (no autocast);
* ``--pure-bf16`` (explicit opt-in, with a warning): bf16 weights and optimizer state, no master copy.

``--dtype auto`` (the default) is bfloat16 on a CUDA GPU that supports it and float32 elsewhere, so the
CPU demo trains in fp32 exactly as before.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Optional

import torch

log = logging.getLogger("atropos-grpo")


@dataclass(frozen=True)
class Precision:
    """Resolved precision: ``master`` = dtype of the stored weights and optimizer state."""

    compute: torch.dtype
    master: torch.dtype
    fsdp_mixed: bool = False  # FSDP2's policy casts the parameters; no autocast then

    @property
    def autocast(self) -> bool:
        return self.compute != self.master and not self.fsdp_mixed

    def describe(self) -> str:
        if self.compute == self.master:
            return f"{_name(self.compute)} weights and compute"
        how = "FSDP2 MixedPrecisionPolicy" if self.fsdp_mixed else "autocast"
        return f"{_name(self.master)} master weights, {_name(self.compute)} compute ({how})"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def compute_dtype_name(dtype: str, device: torch.device) -> str:
    """``auto`` -> bfloat16 on a CUDA device that supports it, float32 otherwise."""
    if dtype != "auto":
        return dtype
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float32"


def resolve_precision(cfg: Any, device: torch.device, fsdp: bool = False) -> Precision:
    """The precision of a ``TrainingConfig`` on ``device`` (``fsdp``: sharded with FSDP2)."""
    compute = getattr(torch, compute_dtype_name(cfg.dtype, device))
    if cfg.pure_bf16:
        return Precision(compute=torch.bfloat16, master=torch.bfloat16)
    mixed = compute != torch.float32
    return Precision(compute=compute, master=torch.float32, fsdp_mixed=mixed and fsdp)


def warn_if_pure(precision: Precision) -> None:
    if precision.master == torch.bfloat16:
        log.warning(
            "--pure-bf16: weights and optimizer state are bf16 with no fp32 master copy; updates "
            "smaller than ~1/256 of a weight (e.g. lr 1e-6) are rounded away. Drop --pure-bf16 for "
            "bf16 compute over fp32 master weights."
        )


def autocast_context(
    precision: Precision, device: torch.device
) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to the compute dtype where the recipe needs it, else a no-op."""
    if not precision.autocast:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=precision.compute)


def fsdp_mp_policy(precision: Precision) -> Optional[Any]:
    """FSDP2 ``MixedPrecisionPolicy`` for bf16 compute over fp32 shards (None: no casting)."""
    if not precision.fsdp_mixed:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return MixedPrecisionPolicy(param_dtype=precision.compute, reduce_dtype=torch.float32)


def publish_dtype(cfg: Any, precision: Precision) -> torch.dtype:
    """The dtype weights are published in (``publish_dtype``; ``auto`` = the compute dtype)."""
    if cfg.publish_dtype == "auto":
        return precision.compute
    return getattr(torch, cfg.publish_dtype)

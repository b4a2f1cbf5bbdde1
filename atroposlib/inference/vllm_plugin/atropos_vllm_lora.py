"""LoRA inside a vLLM server, as an RL loop uses it: an in-place load happens once, and on the CPU
build a LoRA layer costs matmuls, not a copy of the adapter per token.

Two fixes, installed when vLLM imports atroposlib's worker extension (``atropos_vllm_ext``):

1. **An in-place load happens once.** ``/v1/load_lora_adapter`` with ``load_inplace: true`` stores the
   request *with* the flag and attaches it to every later generation request for that adapter, and the
   worker reloads an adapter whose request says ``load_inplace`` at each model step: the adapter is
   re-read from disk at every decode step (vLLM issue 33791). At a model step, an adapter the worker
   already holds under that id is now only touched; the explicit load (``add_lora``) still replaces it.
2. **Grouped LoRA matmuls on CPU.** The CPU build's LoRA ops (``vllm.lora.ops.torch_ops``) gather
   each token's adapter matrices (``weights[indices]``: a copy of A or B per token) and multiply them
   one token at a time (``einsum("bi,boi->bo")``). For a prefill of 1,000 tokens of SmolLM2-135M with
   an r16 adapter on all seven projections that is about 20 GB of copies: measured here, one prefill
   step of 32 prompts took 15-20 s and every request (and any adapter load, which waits for the
   step) stalled behind it. The replacement multiplies each adapter's tokens at once (``x @ W.T``),
   with the same results (the same slot for every index, ``-1`` included, as vLLM's ops pick it).

Everything here runs inside vLLM's worker and imports only vLLM and torch; on a vLLM without these
functions each fix reports itself not installed and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

import torch

logger = logging.getLogger(__name__)


def load_in_place_once() -> bool:
    """Make the worker's per-step adapter activation ignore ``load_inplace`` for an adapter it already
    holds (fix 1); False on a vLLM without that manager."""
    try:
        import msgspec
        from vllm.lora.worker_manager import LRUCacheWorkerLoRAManager
    except ImportError:
        return False
    step_apply = LRUCacheWorkerLoRAManager._apply_adapters
    if getattr(step_apply, "_atropos", False):
        return True

    def apply_adapters(self: Any, lora_requests: set[Any]) -> None:
        loaded = self.list_adapters()
        step_apply(
            self,
            {
                msgspec.structs.replace(r, load_inplace=False)
                if r and r.load_inplace and r.lora_int_id in loaded
                else r
                for r in lora_requests
            },
        )

    apply_adapters._atropos = True  # type: ignore[attr-defined]
    LRUCacheWorkerLoRAManager._apply_adapters = apply_adapters  # type: ignore[method-assign]
    return True


def per_token_lora(
    inputs: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, dtype: torch.dtype
) -> Optional[torch.Tensor]:
    """``out[t] = inputs[t] @ weights[indices[t]].T`` computed one adapter slot at a time; None for
    shapes vLLM's own ops would broadcast (the caller then uses them)."""
    w = weights.squeeze(1) if weights.dim() == 4 else weights  # [slots, out, in]
    if w.dim() != 3 or inputs.dim() != 2 or indices.dim() != 1:
        return None
    if inputs.shape[0] != indices.shape[0] or inputs.shape[1] != w.shape[2]:
        return None
    x = inputs.to(dtype)
    slots = torch.remainder(indices.long(), w.shape[0])  # -1 is the last slot, as w[indices] has it
    first = slots[:1]
    if slots.numel() == 0 or bool((slots == first).all()):
        slot = int(first) if slots.numel() else 0
        return x @ w[slot].to(dtype).t()
    out = x.new_empty((x.shape[0], w.shape[1]))
    for slot in torch.unique(slots).tolist():
        rows = (slots == slot).nonzero().squeeze(1)
        out[rows] = x[rows] @ w[slot].to(dtype).t()
    return out


def _write_shrink(
    output: torch.Tensor, outputs: torch.Tensor, scaling: float = 1.0
) -> Optional[bool]:
    output[:, : outputs.shape[1]] = scaling * outputs
    return True


def _write_expand(
    output: torch.Tensor, outputs: torch.Tensor, add_inputs: bool = True
) -> Optional[bool]:
    if outputs.shape[0] != output.shape[0]:
        return None  # vLLM's op broadcasts a single row: leave that case to it
    width = min(outputs.shape[1], output.shape[1])  # adapter and model may pad differently
    if add_inputs:
        output[:, :width] += outputs[:, :width]
    else:
        output[:, :width] = outputs[:, :width]
    return True


def _write_expand_slice(
    output: torch.Tensor,
    outputs: torch.Tensor,
    slice_offset: int,
    slice_size: int,
    add_inputs: bool = True,
) -> Optional[bool]:
    if outputs.shape[1] != slice_size:
        return None
    if add_inputs:
        output[:, slice_offset : slice_offset + slice_size] += outputs
    else:
        output[:, slice_offset : slice_offset + slice_size] = outputs
    return True


# vLLM's op name -> how its result is written into the output (the arguments after the indices)
WRITERS: dict[str, Callable[..., Optional[bool]]] = {
    "bgmv_shrink": _write_shrink,
    "bgmv_expand": _write_expand,
    "bgmv_expand_slice": _write_expand_slice,
}


def grouped(
    original: Callable[..., None], write: Callable[..., Optional[bool]]
) -> Callable[..., None]:
    """vLLM's ``bgmv_*`` op ``original`` (same arguments) computed by ``per_token_lora`` and written
    by ``write``; shapes either one declines go to ``original``."""

    def op(
        inputs: torch.Tensor,
        weights: torch.Tensor,
        output: torch.Tensor,
        indices: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        outputs = per_token_lora(inputs, weights, indices, output.dtype)
        if outputs is None or write(output, outputs, *args, **kwargs) is None:
            original(inputs, weights, output, indices, *args, **kwargs)

    op._atropos = True  # type: ignore[attr-defined]
    return op


def grouped_cpu_lora_ops() -> bool:
    """Replace the CPU build's per-token LoRA ops with grouped matmuls (fix 2) in every module that
    holds them; False (with a log line when vLLM is on CPU) where they cannot be replaced."""
    try:
        from vllm.lora.ops import torch_ops
        from vllm.lora.ops.torch_ops import lora_ops
        from vllm.lora.punica_wrapper import punica_cpu
        from vllm.platforms import current_platform
    except ImportError:
        return False
    if not current_platform.is_cpu():
        return False  # GPUs use vLLM's Triton kernels: nothing to replace
    missing = [name for name in WRITERS if not callable(getattr(lora_ops, name, None))]
    if missing:
        logger.warning(
            "atroposlib: this vLLM has no %s in vllm.lora.ops.torch_ops: its CPU LoRA ops are left "
            "as they are (they copy the adapter once per token)",
            ", ".join(missing),
        )
        return False
    for name, write in WRITERS.items():
        original = getattr(lora_ops, name)
        if getattr(original, "_atropos", False):
            continue
        op = grouped(original, write)
        for module in (lora_ops, torch_ops, punica_cpu):  # sgmv_* call lora_ops' names
            if hasattr(module, name):
                setattr(module, name, op)
    return True


__all__ = ["WRITERS", "grouped", "grouped_cpu_lora_ops", "load_in_place_once", "per_token_lora"]

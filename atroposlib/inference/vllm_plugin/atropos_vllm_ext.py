"""A vLLM worker extension: reload full weights from a folder, in place, correctly on every device.

vLLM's own ``reload_weights`` (``POST /collective_rpc {"method": "reload_weights"}``) loads the new tensors
into the model's storage, but on the CPU build a layer whose weight is *shared* with another (the LM head
of a model with ``tie_word_embeddings``) loads nothing itself, so vLLM skips its post-load processing and
it keeps the GEMM weights it pre-packed (oneDNN / sgl-kernel) from the *old* embedding: the server then
samples with the new body and the old head. ``atropos_reload_weights`` reloads and then re-runs the CPU
GEMM dispatch of every layer that still holds its weight, so the packed copies match the new values.
On GPU the dispatch reads ``layer.weight`` directly and the extra step does nothing.

Start the server with ``--worker-extension-cls atropos_vllm_ext.AtroposWorkerExtension`` and this folder
on ``PYTHONPATH``; call it with ``POST /collective_rpc {"method": "atropos_reload_weights", "kwargs":
{"weights_path": DIR}}`` (needs ``VLLM_SERVER_DEV_MODE=1``), between ``/pause?mode=wait`` and
``/resume``, followed by ``/reset_prefix_cache`` (cached KV blocks were computed with the old weights).

Loading this module (vLLM does, for ``--worker-extension-cls``) also registers the ``atropos_gloo``
weight-transfer backend (``atropos_vllm_transfer``): vLLM's NCCL weight-transfer routes with a gloo
data plane, for a server without a GPU (``--weight-transfer-config '{"backend": "atropos_gloo"}'``).

It also installs ``atropos_vllm_lora``'s two LoRA fixes: an in-place LoRA load happens once (not at
every model step, vLLM issue 33791), and the CPU build's LoRA layers run as grouped matmuls instead of
copying the adapter once per token. ``atropos_lora_loads_once`` says whether the first is active.

This module runs inside vLLM's process and imports only vLLM and torch.
"""

from __future__ import annotations

from typing import Any

from atropos_vllm_lora import grouped_cpu_lora_ops, load_in_place_once


class AtroposWorkerExtension:
    """Mixed into vLLM's worker class by ``--worker-extension-cls``; ``self`` is the worker."""

    def atropos_reload_weights(self, weights_path: str) -> dict[str, Any]:
        """Load the checkpoint at ``weights_path`` into the running model; return what was repacked."""
        runner = self.model_runner  # type: ignore[attr-defined]
        runner.reload_weights(weights_path=weights_path)
        repacked = repack_cpu_gemms(runner.get_model())
        return {"weights_path": weights_path, "repacked_layers": repacked}

    def atropos_lora_loads_once(self) -> bool:
        """True when this worker reloads an in-place-loaded adapter only at its load, not every step."""
        return _LORA_FIX_INSTALLED


def repack_cpu_gemms(model: Any) -> list[str]:
    """Re-run the CPU GEMM dispatch of layers that pre-packed a weight they still hold."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return []
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    done = []
    for name, layer in model.named_modules():
        weight = getattr(layer, "weight", None)
        if not hasattr(layer, "cpu_linear") or weight is None:
            continue
        if weight.ndim != 2 or weight.numel() == 0:  # 0: the layer dropped its weight after packing
            continue
        dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
        done.append(name)
    return done


def _register_transfer_backend() -> None:
    """Make ``atropos_gloo`` a weight-transfer backend of this vLLM (a no-op on a vLLM without the
    weight-transfer API, or when already registered)."""
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    except ImportError:
        return
    try:
        WeightTransferEngineFactory.register_engine(
            "atropos_gloo", "atropos_vllm_transfer", "GlooWeightTransferEngine"
        )
    except ValueError:  # registered already (the module was imported twice)
        pass


_register_transfer_backend()
_LORA_FIX_INSTALLED = load_in_place_once()
GROUPED_CPU_LORA = grouped_cpu_lora_ops()

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

It also makes an in-place LoRA load happen once. vLLM's ``/v1/load_lora_adapter`` with
``load_inplace: true`` stores the request *with* the flag and attaches it to every later generation
request for that adapter, and the worker reloads any adapter whose request says ``load_inplace`` at
each model step: the adapter is re-read from disk at every decode step (vLLM issue 33791; measured
here on SmolLM2-135M, r16: generation of 32 replies fell to 20-40 tokens/s and a load waited 14-25 s).
In the worker, an adapter already loaded under that id is now only touched at a model step; the
explicit load (``add_lora``) still replaces it. ``atropos_lora_loads_once`` says the fix is active.

This module runs inside vLLM's process and imports only vLLM and torch.
"""

from __future__ import annotations

from typing import Any


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


def _load_in_place_once() -> bool:
    """Make the worker's per-step adapter activation ignore ``load_inplace`` for an adapter it already
    holds (see the module docstring); False on a vLLM without that manager."""
    try:
        import msgspec
        from vllm.lora.worker_manager import LRUCacheWorkerLoRAManager
    except ImportError:
        return False
    step_apply = LRUCacheWorkerLoRAManager._apply_adapters
    if getattr(step_apply, "_atropos_once", False):
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

    apply_adapters._atropos_once = True  # type: ignore[attr-defined]
    LRUCacheWorkerLoRAManager._apply_adapters = apply_adapters  # type: ignore[method-assign]
    return True


_register_transfer_backend()
_LORA_FIX_INSTALLED = _load_in_place_once()

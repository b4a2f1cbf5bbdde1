"""Code that runs *inside* a vLLM server, not in atroposlib's processes.

``atropos_vllm_ext`` is a vLLM worker extension (``--worker-extension-cls
atropos_vllm_ext.AtroposWorkerExtension``); vLLM imports it by its top-level name, so the server's
``PYTHONPATH`` must contain this folder (``extension_dir()``). The module imports nothing from atroposlib,
so it loads in vLLM's own environment.
"""

from __future__ import annotations

from pathlib import Path

EXTENSION_CLASS = "atropos_vllm_ext.AtroposWorkerExtension"
RELOAD_METHOD = "atropos_reload_weights"
LORA_ONCE_METHOD = "atropos_lora_loads_once"


def extension_dir() -> Path:
    """The folder to put on the vLLM server's ``PYTHONPATH`` for ``EXTENSION_CLASS`` to import."""
    return Path(__file__).resolve().parent


__all__ = ["EXTENSION_CLASS", "LORA_ONCE_METHOD", "RELOAD_METHOD", "extension_dir"]

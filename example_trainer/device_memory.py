"""Restart mode on a GPU the trainer shares with the inference server: will the server fit?

vLLM claims a fixed fraction of the GPU's *total* memory at start-up (``--gpu-memory-utilization U``)
and refuses to start when less than that is free ("Free memory on device ... is less than desired GPU
memory utilization"). On a GPU shared with the trainer, what is free is what the trainer's weights,
gradients and optimizer state leave, minus whatever the previous server has not yet handed back (its
engine process can outlive the API process by seconds). So before each (re)launch the trainer

1. waits until every process of the old server's process group has exited (``RestartRefresh._stop``),
2. hands its own cached blocks back (``torch.cuda.empty_cache``), and
3. polls the device's free memory (``DeviceMemory.free_and_total``) until the server's claim fits, for
   at most ``inference_memory_wait_s``; if it never does, the run ends with one line saying how much
   the server asks for, how much is free, and what to change.

``DeviceMemory`` is the one thing read from the device: ``CudaMemory`` asks CUDA (``mem_get_info``, the
whole device's free memory, other processes included); tests give a stand-in.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from atroposlib.errors import InferenceError

GIB = 2**30


class DeviceMemory(Protocol):
    """Free and total bytes of the device the inference server will run on."""

    @property
    def name(self) -> str: ...

    def free_and_total(self) -> tuple[int, int]: ...

    def trainer_bytes(self) -> Optional[int]:
        """Bytes this process (the trainer) holds on the device, when known."""
        ...


@dataclass
class CudaMemory:
    """A CUDA device, read through torch (``torch.cuda.mem_get_info``)."""

    device: Any  # torch.device

    @property
    def name(self) -> str:
        return str(self.device)

    def free_and_total(self) -> tuple[int, int]:
        import torch

        free, total = torch.cuda.mem_get_info(self.device)
        return int(free), int(total)

    def trainer_bytes(self) -> Optional[int]:
        import torch

        return int(torch.cuda.memory_reserved(self.device))


def utilization_in(command: str) -> Optional[float]:
    """The ``--gpu-memory-utilization`` a launch command asks for (vLLM's flag), or None."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    for i, arg in enumerate(argv):
        value: Optional[str] = None
        if arg == "--gpu-memory-utilization" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--gpu-memory-utilization="):
            value = arg.split("=", 1)[1]
        if value is not None:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def wait_until_it_fits(
    memory: DeviceMemory,
    utilization: float,
    timeout_s: float,
    *,
    poll_s: float = 0.5,
    release: Callable[[], None] = lambda: None,
    log: Optional[Any] = None,
) -> tuple[int, float]:
    """Wait until ``utilization`` x the device's total memory is free (what vLLM claims at start-up).

    Returns (free bytes when it fit, seconds waited). Raises ``InferenceError`` with one line after
    ``timeout_s`` without room. ``release`` runs before each look (the trainer's ``empty_cache``)."""
    t0 = time.monotonic()
    told = False
    while True:
        release()
        free, total = memory.free_and_total()
        need = int(utilization * total)
        if free >= need:
            return free, time.monotonic() - t0
        waited = time.monotonic() - t0
        if waited >= timeout_s:
            held = memory.trainer_bytes()
            trainer = f"; the trainer holds {held / GIB:.1f} GiB" if held is not None else ""
            raise InferenceError(
                f"restart: the inference server cannot fit on {memory.name}: it claims "
                f"{need / GIB:.1f} GiB (--gpu-memory-utilization {utilization:g} of "
                f"{total / GIB:.1f} GiB) but {free / GIB:.1f} GiB are free after {waited:.0f} s"
                f"{trainer}; lower --gpu-memory-utilization in --inference-command (at most "
                f"{max(free - GIB, 0) / total:.2f} fits now), or put the server on another GPU"
            )
        if log is not None and not told:
            told = True
            log.info(
                "restart: waiting for %.1f GiB on %s (%.1f GiB free); the old server may still be "
                "releasing its memory",
                need / GIB,
                memory.name,
                free / GIB,
            )
        time.sleep(poll_s)


__all__ = ["CudaMemory", "DeviceMemory", "GIB", "utilization_in", "wait_until_it_fits"]

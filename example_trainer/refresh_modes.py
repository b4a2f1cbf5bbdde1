"""The weight-refresh strategy of a run, by ``weight_refresh`` mode (one line per mode)."""

from __future__ import annotations

from typing import Any

from .config import TrainingConfig
from .device_memory import CudaMemory
from .transfer_refresh import TransferRefresh
from .weight_refresh import LoraRefresh, NoRefresh, ReloadRefresh, RestartRefresh, WeightRefresh

MODES: dict[str, type[WeightRefresh]] = {
    "none": NoRefresh,
    "reload": ReloadRefresh,
    "restart": RestartRefresh,
    "lora": LoraRefresh,
    "nccl": TransferRefresh,
}


def make_weight_refresh(
    cfg: TrainingConfig, publish_dtype: Any = None, device: Any = None
) -> WeightRefresh:
    """The strategy of ``cfg.weight_refresh``; ``publish_dtype``: the dtype full weights are
    published in (``precision.publish_dtype``), None = as the model holds them; ``device``: the
    trainer's (restart mode checks a CUDA device's free memory before each launch; nccl mode
    broadcasts from it)."""
    refresher = MODES[cfg.weight_refresh](cfg)
    refresher.publish_dtype = publish_dtype
    if isinstance(refresher, RestartRefresh) and getattr(device, "type", None) == "cuda":
        refresher.memory = CudaMemory(device)
    if isinstance(refresher, TransferRefresh) and device is not None:
        refresher.device = device
    return refresher


__all__ = ["MODES", "make_weight_refresh"]

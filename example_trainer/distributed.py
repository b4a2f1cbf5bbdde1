"""torch.distributed plumbing for the trainer: process group, batch broadcast, DDP/FSDP wrapping.

Under ``torchrun`` rank 0 talks to the trajectory API and broadcasts each batch (a list of group dicts)
to every rank; every rank trains on its shard; rank 0 acks and refreshes the inference servers.
Without ``torchrun`` (WORLD_SIZE unset) everything here is a no-op on a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device) -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        torch.cuda.set_device(local)
    return DistInfo(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local)


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not info.enabled:
        return obj
    box: list[Any] = [obj if info.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_sums(values: dict[str, float], info: DistInfo, maxima: tuple = (), minima: tuple = ()) -> dict[str, float]:
    """Sum (or max/min for the named keys) scalar statistics over ranks."""
    if not info.enabled or not values:
        return values
    keys = sorted(values)
    out: dict[str, float] = {}
    for op, selected in (
        (dist.ReduceOp.SUM, [k for k in keys if k not in maxima and k not in minima]),
        (dist.ReduceOp.MAX, [k for k in keys if k in maxima]),
        (dist.ReduceOp.MIN, [k for k in keys if k in minima]),
    ):
        if not selected:
            continue
        t = torch.tensor([float(values[k]) for k in selected], dtype=torch.float64)
        dist.all_reduce(t, op=op)
        out.update({k: float(v) for k, v in zip(selected, t.tolist(), strict=False)})
    return out


def wrap_model(model: torch.nn.Module, info: DistInfo, parallel: str, device: torch.device) -> torch.nn.Module:
    """DDP (gloo on CPU / NCCL on GPU) or FSDP2 ``fully_shard`` on GPU; unchanged on one process."""
    if not info.enabled:
        return model
    if parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        layers = getattr(getattr(model, "model", model), "layers", [])
        for layer in layers:
            fully_shard(layer)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [info.local_rank] if device.type == "cuda" else None
    return DDP(model, device_ids=ids)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, "module") and not hasattr(model, "save_pretrained") else model


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()

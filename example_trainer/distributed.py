"""torch.distributed plumbing for the trainer: process group, batch broadcast, DDP/FSDP wrapping.

Under ``torchrun`` rank 0 talks to the trajectory API and broadcasts each batch (a list of group dicts)
to every rank; every rank trains on its shard; rank 0 acks and refreshes the inference servers.
Without ``torchrun`` (WORLD_SIZE unset) everything here is a no-op on a single process.

Every collective the trainer issues outside DDP/FSDP (batch broadcast, statistics all-reduce, barrier)
is one of the helpers below, and each puts its tensors on ``DistInfo.device``: the device the process
group serves, chosen once by ``collective_device``. NCCL serves only CUDA tensors (a CPU tensor fails
with "No backend type associated with device type cpu"), so on GPUs that is the rank's ``cuda:N``; gloo
serves CPU tensors. ``ATROPOS_DIST_BACKEND`` overrides the backend string (e.g. ``cpu:gloo,cuda:nccl``, or
``cuda:gloo``, which dispatches like NCCL and lets CPU tests catch a CPU tensor sent to a CUDA-only
group: ``tests/trainer/test_trainer_collectives.py``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

import torch
import torch.distributed as dist

from atroposlib.errors import ConfigError


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    # where the tensors of this rank's collectives live: a device type the process group serves
    device: torch.device = torch.device("cpu")

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device, timeout_s: Optional[float] = None) -> DistInfo:
    """The process group of a ``torchrun`` rank (a no-op ``DistInfo`` on one process).

    ``timeout_s``: how long a collective may wait for the other ranks (``TrainingConfig
    .resolved_distributed_timeout``: by default the loop's longest planned wait). Left to torch, it
    is 10 minutes for NCCL (30 for gloo), shorter than rank 0 starting vLLM and then waiting for a
    batch while the other ranks sit in the batch broadcast."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(device=device)
    backend = os.environ.get("ATROPOS_DIST_BACKEND") or (
        "nccl" if device.type == "cuda" else "gloo"
    )
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {}
        if timeout_s is not None:
            kwargs["timeout"] = timedelta(seconds=timeout_s)
        dist.init_process_group(backend=backend, **kwargs)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":  # resolve_device gave this rank cuda:LOCAL_RANK
        torch.cuda.set_device(device)
    return DistInfo(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=local,
        device=collective_device(device),
    )


def group_device_types(group: Optional[Any] = None) -> list[str]:
    """The device types the (default) process group has a backend for, from its public backend
    config (``"cuda:nccl"``, ``"cpu:gloo,cuda:gloo"``, ...)."""
    config = str(dist.get_backend_config(group))
    return [pair.split(":", 1)[0].strip() for pair in config.split(",") if ":" in pair]


def collective_device(device: torch.device, group: Optional[Any] = None) -> torch.device:
    """The device this rank's collective tensors go on: its own ``device`` when the group serves that
    device type, else CPU when the group serves CPU; otherwise a ``ConfigError`` at start-up (rather
    than the first collective failing after a whole training step)."""
    served = group_device_types(group)
    if device.type in served:
        return device
    if "cpu" in served:
        return torch.device("cpu")
    raise ConfigError(
        f"distributed: the process group ({dist.get_backend_config(group)}) serves only "
        f"{', '.join(served) or 'no'} tensors, but this rank's device is {device}"
    )


def _device_tensor(values: list[float], info: DistInfo, dtype: torch.dtype) -> torch.Tensor:
    """The one place a collective's tensor is made: on ``info.device``."""
    return torch.tensor(values, dtype=dtype, device=info.device)


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not info.enabled:
        return obj
    box: list[Any] = [obj if info.is_main else None]
    # the pickled bytes travel as a tensor on info.device (torch would otherwise pick the device)
    dist.broadcast_object_list(box, src=0, device=info.device)
    return box[0]


def all_reduce_sums(
    values: dict[str, float], info: DistInfo, maxima: tuple = (), minima: tuple = ()
) -> dict[str, float]:
    """Sum (or max/min for the named keys) scalar statistics over ranks, as float64 on
    ``info.device`` (NCCL reduces float64 too)."""
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
        t = _device_tensor([float(values[k]) for k in selected], info, torch.float64)
        dist.all_reduce(t, op=op)
        out.update({k: float(v) for k, v in zip(selected, t.tolist(), strict=False)})
    return out


def wrap_model(
    model: torch.nn.Module,
    info: DistInfo,
    parallel: str,
    device: torch.device,
    mp_policy: Optional[Any] = None,
) -> torch.nn.Module:
    """DDP or FSDP2 ``shard_model`` on CPU with gloo or on GPUs with NCCL; unchanged on one process.

    FSDP2 keeps the module's class (parameters become sharded DTensors), averages gradients over ranks
    like DDP, and has no ``no_sync``: gradients are reduce-scattered after every micro-batch.
    ``mp_policy``: FSDP2's ``MixedPrecisionPolicy`` (bf16 compute over the fp32 shards)."""
    if not info.enabled:
        return model
    if parallel == "fsdp":
        return shard_model(model, info, device, mp_policy)
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [device.index if device.index is not None else info.local_rank]
    return DDP(model, device_ids=ids if device.type == "cuda" else None)


@functools.cache
def _mesh(device_type: str, world_size: int) -> Any:
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device_type, (world_size,))


def shard_model(
    model: torch.nn.Module, info: DistInfo, device: torch.device, mp_policy: Optional[Any] = None
) -> torch.nn.Module:
    """FSDP2 ``fully_shard`` of each decoder layer, then the root, over a 1-D mesh of all ranks."""
    from torch.distributed.fsdp import fully_shard

    mesh = _mesh(device.type, info.world_size)
    kwargs: dict[str, Any] = {"mesh": mesh}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    layers = getattr(getattr(model, "model", model), "layers", [])
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def full_model_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """FSDP: the full (unsharded) weights on CPU, on rank 0 (others get an empty dict); every rank must
    call it. Aliases of tied weights (``lm_head`` = ``embed_tokens``) are dropped, as HF's own saving does:
    ``save_pretrained`` with an explicit state dict would otherwise write them twice."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    sd = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    first_name: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first_name and name in sd:
            del sd[name]
        first_name.setdefault(id(param), name)
    return sd


def full_optimizer_state_dict(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """FSDP: the whole optimizer state keyed by parameter name, on CPU on rank 0; every rank must
    call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(model, optimizer, options=options)


def load_full_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> None:
    """FSDP resume: every rank reads the full optimizer state (from the shared checkpoint folder) and
    keeps its shard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer, optim_state_dict=state, options=options)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return (
        model.module
        if hasattr(model, "module") and not hasattr(model, "save_pretrained")
        else model
    )


def barrier(info: DistInfo) -> None:
    """Every rank waits for every other: an all-reduce of one element on ``info.device``
    (``dist.barrier`` picks its device from the accelerator it detects, not from the group)."""
    if info.enabled:
        dist.all_reduce(_device_tensor([0.0], info, torch.float32))


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()

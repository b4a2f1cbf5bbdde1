"""One rank of ``test_trainer_collectives.py``: started twice with torchrun's environment variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); prints one JSON line of what it saw.

``gloo``: ``init_distributed`` as the trainer calls it, then every collective helper, with their values.
``timeout``: a group made with a short timeout, and a rank left waiting past it.
``cuda-only``: the group made from ``ATROPOS_DIST_BACKEND=cuda:gloo`` (serves only CUDA tensors, like
NCCL): what the trainer's start-up says, what the old CPU-tensor all-reduce did, and where each helper
sends its tensors when given the group's device (CUDA) or, for contrast, CPU.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from atroposlib.errors import ConfigError
from example_trainer.distributed import (
    DistInfo,
    all_reduce_sums,
    barrier,
    broadcast_object,
    collective_device,
    init_distributed,
    shutdown,
)


def _error(fn) -> str:
    """'' when ``fn()`` succeeds, else the error's first line."""
    try:
        fn()
    except Exception as e:  # the message is what the test asserts on
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return ""


def _helpers(info: DistInfo) -> dict:
    rank = info.rank
    return {
        "all_reduce_sums": lambda: all_reduce_sums(
            {"tokens": rank + 1.0, "ratio_max": float(rank), "ratio_min": float(rank) + 0.5},
            info,
            maxima=("ratio_max",),
            minima=("ratio_min",),
        ),
        "broadcast_object": lambda: broadcast_object(
            {"batch": [1, 2, 3]} if rank == 0 else None, info
        ),
        "barrier": lambda: barrier(info),
    }


def gloo() -> dict:
    info = init_distributed(torch.device("cpu"))
    helpers = _helpers(info)
    out = {
        "device": str(info.device),
        "sums": helpers["all_reduce_sums"](),
        "object": helpers["broadcast_object"](),
    }
    helpers["barrier"]()
    shutdown(info)
    return out


def cuda_only() -> dict:
    out: dict = {}
    try:
        init_distributed(torch.device("cpu"))  # a CPU trainer on a group that serves only CUDA
        out["init"] = ""
    except ConfigError as e:
        out["init"] = str(e)
    assert dist.is_initialized(), "init_distributed made the group before refusing"
    rank = dist.get_rank()
    # what distributed.all_reduce_sums did before: a CPU float64 tensor
    out["old_cpu_all_reduce"] = _error(
        lambda: dist.all_reduce(torch.tensor([1.0], dtype=torch.float64))
    )
    out["chosen_device"] = str(collective_device(torch.device("cuda", 0)))
    cuda = DistInfo(rank=rank, world_size=2, device=torch.device("cuda", 0))
    cpu = DistInfo(rank=rank, world_size=2, device=torch.device("cpu"))
    out["helpers_on_group_device"] = {k: _error(f) for k, f in _helpers(cuda).items()}
    out["helpers_on_cpu"] = {k: _error(f) for k, f in _helpers(cpu).items()}
    out["cuda_available"] = torch.cuda.is_available()
    # what this torch build says when a tensor is put on CUDA it cannot reach: "Torch not compiled
    # with CUDA enabled" (a CPU build) or "Found no NVIDIA driver on your system" (a CUDA build on a
    # machine without a GPU)
    out["no_cuda_error"] = _error(lambda: torch.zeros(1, device="cuda"))
    dist.destroy_process_group()
    return out


def timeout() -> dict:
    """The process group's timeout is the one ``init_distributed`` is given: rank 0 sleeps past it
    before the broadcast rank 1 waits in, and rank 1 reports how long it waited and what it got."""
    limit = float(os.environ["TIMEOUT_S"])
    info = init_distributed(torch.device("cpu"), timeout_s=limit)
    out: dict = {"limit": limit}
    if info.is_main:
        time.sleep(limit * 3)
        out["error"] = _error(lambda: broadcast_object({"late": True}, info))
    else:
        t0 = time.monotonic()
        out["error"] = _error(lambda: broadcast_object(None, info))
        out["waited_s"] = time.monotonic() - t0
    return out


if __name__ == "__main__":
    result = {"gloo": gloo, "cuda-only": cuda_only, "timeout": timeout}[sys.argv[1]]()
    result["rank"] = int(os.environ["RANK"])
    print(json.dumps(result), flush=True)
    if sys.argv[1] == "timeout":
        # a group whose operation timed out may abort in its destructor at exit ("terminate called
        # without an active exception"): what this rank saw is printed, leave without it
        os._exit(0)

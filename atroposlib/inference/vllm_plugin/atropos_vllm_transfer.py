"""A vLLM weight-transfer engine that receives the trainer's broadcast over gloo: vLLM's NCCL weight
transfer, for servers without a GPU (the vLLM CPU build).

vLLM's weight-transfer API (``--weight-transfer-config '{"backend": ...}'``, dev-mode routes
``/init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``,
``/finish_weight_update``) picks its data plane by backend name; its ``nccl`` engine joins an NCCL
group with the trainer, which needs CUDA. This engine, registered as ``atropos_gloo`` when the
worker extension loads (``atropos_vllm_ext``), follows the same contract with a gloo group instead:

* ``init_transfer_engine``: join the trainer's TCP store (``master_address``/``master_port``, the
  trainer is rank 0 and hosts it) under the key prefix ``session``, as rank ``rank_offset`` + this
  worker's rank, in a group of ``world_size``; waits at most ``timeout_s`` for the trainer.
* ``start_weight_update`` / ``finish_weight_update``: vLLM's layerwise reload, as its NCCL engine
  does, then (finish) the CPU GEMM repack that a tied LM head needs (see ``atropos_vllm_ext``).
* ``receive_weights``: for each (name, dtype, shape) of the update info, in order, a broadcast from
  rank 0 into a fresh tensor, loaded with the model's ``load_weights``.

Runs inside vLLM's process and imports only vLLM and torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

BACKEND = "atropos_gloo"


@dataclass
class GlooInitInfo(WeightTransferInitInfo):
    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    session: str = "atropos-transfer"
    timeout_s: float = 120.0


@dataclass
class GlooUpdateInfo(WeightTransferUpdateInfo):
    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (len(self.names) == len(self.dtype_names) == len(self.shapes)):
            raise ValueError(
                f"names, dtype_names and shapes must have one entry per weight: got "
                f"{len(self.names)}, {len(self.dtype_names)} and {len(self.shapes)}"
            )


class GlooWeightTransferEngine(WeightTransferEngine[GlooInitInfo, GlooUpdateInfo]):
    init_info_cls = GlooInitInfo
    update_info_cls = GlooUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group: Any = None
        self.store: Any = None

    def init_transfer_engine(self, init_info: GlooInitInfo) -> None:
        self.shutdown()
        timeout = timedelta(seconds=init_info.timeout_s)
        parallel = self.parallel_config  # this worker's rank over every data-parallel replica
        worker = parallel.data_parallel_index * parallel.world_size + parallel.rank
        rank = init_info.rank_offset + worker
        self.store = dist.TCPStore(
            init_info.master_address, init_info.master_port, None, False, timeout=timeout
        )
        prefixed = dist.PrefixStore(init_info.session, self.store)
        self.group = dist.ProcessGroupGloo(prefixed, rank, init_info.world_size, timeout)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from atropos_vllm_ext import repack_cpu_gemms
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        repack_cpu_gemms(self.model)

    def receive_weights(self, update_info: GlooUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError(
                "gloo weight transfer not initialized: call /init_weight_transfer_engine first"
            )
        options = dist.BroadcastOptions()
        options.rootRank = 0
        for name, dtype_name, shape in zip(
            update_info.names, update_info.dtype_names, update_info.shapes, strict=True
        ):
            weight = torch.empty(shape, dtype=getattr(torch, dtype_name), device=self.device)
            self.group.broadcast([weight], options).wait()
            self.model.load_weights([(name, weight)])
            del weight

    def shutdown(self) -> None:
        self.group = None
        self.store = None

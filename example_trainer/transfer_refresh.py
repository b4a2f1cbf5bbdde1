"""``--weight-refresh nccl``: the new weights go from the trainer's memory to the vLLM servers' workers by
broadcast, through vLLM's weight-transfer API, without touching the disk.

Set-up (``start``, rank 0): each server's ``/get_world_size``; the trainer's group (``transfer_group``:
NCCL on GPUs, atroposlib's gloo backend for vLLM's CPU build) of 1 + all their workers; every server is
asked to ``/init_weight_transfer_engine`` (its first worker at rank 1 + the workers before it) while
the trainer joins as rank 0. On ``--resume`` the checkpoint's weights are sent at once (the servers
still hold older ones).

Each refresh (``_send``): ``/pause?mode=wait`` on every server, ``/start_weight_update``,
``/update_weights`` with the names, dtypes and shapes (in a background thread: it returns once the
workers have every tensor) while the trainer broadcasts the tensors in that order, each cast to the
publish dtype and moved to the group's device one at a time, ``/finish_weight_update`` with the trainer
step as the server's ``weight_version``, ``/resume`` (always). The weights are those a published
folder would hold (``checkpoint.publishable``: tied aliases once); under FSDP the gathered full state
dict. The step's metrics get ``transfer_s``, ``transfer_mib`` and the version the server reports.

Failures end in one line (``WeightTransferError``), never a hang: every HTTP call, the rendezvous and
each broadcast have the deadline ``transfer_timeout_s``, and a server whose call failed stops the
trainer from waiting for it. Then ``transfer_fallback``: ``reload`` (default) says so once and
publishes through disk (``ReloadRefresh``) for the rest of the run, with ``transfer_fallback: 1`` in
every later metrics row; ``fail`` ends the run with the line.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import torch

from atroposlib.errors import WeightTransferError
from atroposlib.inference_clients.weight_transfer import WeightTransferClient

from .checkpoint import publishable
from .config import TrainingConfig
from .transfer_group import TransferGroup, make_group
from .weight_refresh import ReloadRefresh, WeightRefresh

log = logging.getLogger(__name__)


def _first_failure(futures: list[Future]) -> Optional[str]:
    """The error of the first of ``futures`` that has failed, as one line, or None."""
    for f in futures:
        if f.done() and f.exception() is not None:
            return str(f.exception()).strip().splitlines()[0]
    return None


def folder_tensors(path: str) -> dict[str, torch.Tensor]:
    """The tensors of a saved model folder (its ``*.safetensors``), on CPU."""
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        out.update(load_file(str(f)))
    if not out:
        raise WeightTransferError(f"transfer: no *.safetensors weights in {path}")
    return out


class TransferRefresh(WeightRefresh):
    mode = "nccl"

    def __init__(self, cfg: TrainingConfig, device: Optional[torch.device] = None) -> None:
        super().__init__(cfg)
        self.device = device or torch.device("cpu")
        self.timeout_s = cfg.transfer_timeout_s
        self._http = self.http_client(cfg.transfer_timeout_s)
        self.servers = [WeightTransferClient(self._http, url) for url in self.urls]
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.servers)))
        self.group: Optional[TransferGroup] = None
        self._left: list[TransferGroup] = []  # groups left after a failure, closed at the end
        self.fallback: Optional[WeightRefresh] = None
        self.last_version: Optional[str] = None

    # set-up -------------------------------------------------------------------------------
    def start(self, model_path: str, step: int = 0) -> None:
        try:
            self._connect()
            if self.cfg.resume:  # the servers may hold older weights than the checkpoint
                self._send(step, folder_tensors(model_path))
        except WeightTransferError as e:
            self._fall_back(e)
            assert self.fallback is not None
            self.fallback.start(model_path, step)

    def _connect(self) -> None:
        sizes = [server.world_size() for server in self.servers]
        world = 1 + sum(sizes)
        self.group = group = make_group(
            self.cfg.transfer_backend, self.device, self.cfg.transfer_master_address
        )
        offsets = [1 + sum(sizes[:i]) for i in range(len(sizes))]
        t0 = time.perf_counter()
        futures = [
            self._pool.submit(server.init, group.init_info(offset, world, self.timeout_s))
            for server, offset in zip(self.servers, offsets, strict=True)
        ]
        try:
            group.connect(world, self.timeout_s, lambda: _first_failure(futures))
            for f in futures:
                f.result(timeout=self.timeout_s)
        except WeightTransferError:
            self._drop_group()
            raise
        except Exception as e:  # a server's init failed after the workers joined, or timed out
            self._drop_group()
            raise WeightTransferError(
                f"transfer: a server's /init_weight_transfer_engine failed: {e}"
            ) from e
        log.info(
            "nccl: %s group of %d ranks formed with %d server(s) in %.2f s",
            group.backend,
            world,
            len(self.servers),
            time.perf_counter() - t0,
        )

    def _drop_group(self) -> None:
        """Leave the group at once (a gloo group still busy is torn down in the background)."""
        if self.group is not None:
            self._left.append(self.group)
            self.group.abandon()
            self.group = None

    def _fall_back(self, error: WeightTransferError) -> None:
        self._drop_group()
        if self.cfg.transfer_fallback == "fail":
            raise error
        log.error(
            "%s; publishing through disk (reload mode) for the rest of the run "
            "(transfer_fallback=reload)",
            error,
        )
        reload = ReloadRefresh(self.cfg)
        reload.publish_dtype = self.publish_dtype
        self.fallback = reload

    # each refresh ---------------------------------------------------------------------------
    def refresh(
        self, step: int, model: Any, tokenizer: Any, state_dict: Any = None
    ) -> dict[str, Any]:
        if self.fallback is None:
            t0 = time.perf_counter()
            try:
                sent = self._send(step, publishable(model, state_dict))
                return {
                    "policy_version": step,
                    "weights_version": self.last_version,
                    "weights_version_step": step,
                    "refresh_s": time.perf_counter() - t0,
                    "transfer_s": time.perf_counter() - t0,
                    "transfer_mib": round(sent / 2**20, 3),
                    "transfer_fallback": 0,
                }
            except WeightTransferError as e:
                self._fall_back(e)
        assert self.fallback is not None
        out = self.fallback.refresh(step, model, tokenizer, state_dict)
        out["transfer_fallback"] = 1
        return out

    def _send(self, step: int, tensors: dict[str, torch.Tensor]) -> int:
        """Push ``tensors`` (name -> tensor) to every server; returns the bytes broadcast."""
        group = self.group
        if group is None:
            raise WeightTransferError("transfer: no group (the set-up failed)")
        dtype = self.publish_dtype

        def wire(t: torch.Tensor) -> torch.dtype:
            return dtype if (dtype is not None and t.is_floating_point()) else t.dtype

        names = list(tensors)
        info = {
            "names": names,
            "dtype_names": [str(wire(tensors[n])).replace("torch.", "") for n in names],
            "shapes": [list(tensors[n].shape) for n in names],
        }
        paused: list[WeightTransferClient] = []
        sent = 0
        t0 = time.perf_counter()
        try:
            for server in self.servers:
                server.pause()
                paused.append(server)
            for server in self.servers:
                server.start_update()
            updates = [self._pool.submit(server.update, info) for server in self.servers]
            for name in names:
                t = tensors[name].detach()
                out = t.to(device=group.device, dtype=wire(t)).contiguous()
                group.broadcast(out, self.timeout_s, lambda: _first_failure(updates))
                sent += out.numel() * out.element_size()
                del out
            for f in updates:
                try:
                    f.result(timeout=self.timeout_s)
                except WeightTransferError:
                    raise
                except Exception as e:  # the wait itself timed out
                    raise WeightTransferError(
                        f"transfer: /update_weights did not return within {self.timeout_s:.0f} s"
                    ) from e
            for server in self.servers:
                server.finish_update(str(step))
            self.last_version = self.servers[0].weight_version()
        except WeightTransferError:
            self._drop_group()  # a broadcast stream cut short cannot be resumed
            raise
        finally:
            for server in paused:
                try:
                    server.resume()
                except WeightTransferError as e:
                    log.error("%s (the server stays paused until it is resumed)", e)
        log.info(
            "nccl: step %d's weights (%d tensors, %.1f MiB%s) broadcast to %d server(s) in %.2f s; "
            "weight_version %s",
            step,
            len(names),
            sent / 2**20,
            f" {str(dtype).replace('torch.', '')}" if dtype is not None else "",
            len(self.servers),
            time.perf_counter() - t0,
            self.last_version,
        )
        return sent

    def close(self) -> None:
        try:
            if self.fallback is not None:
                self.fallback.close()
            elif self.group is not None:
                for server in self.servers:  # release the workers' end (best effort)
                    try:
                        server.shutdown()
                    except WeightTransferError:
                        pass
        finally:
            if self.group is not None:
                self.group.close()
                self.group = None
            for group in self._left:  # waits for a torn-down group's last operation to end
                group.close()
            self._pool.shutdown(wait=False)
            self._http.close()


__all__ = ["TransferRefresh", "folder_tensors"]

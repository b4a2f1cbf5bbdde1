"""The trainer's end of a weight-transfer group: it joins the inference servers' workers as rank 0 and
broadcasts the weights to them, one tensor at a time, every step bounded by a deadline.

* ``NcclGroup`` (``--transfer-backend nccl``, GPUs): vLLM's ``nccl`` backend. The trainer mints an
  NCCL unique id, sends it as ``nccl_unique_id_b64`` and joins from it (``atroposlib.utils.nccl``); tensors must be
  on the trainer's CUDA device. NCCL refuses two ranks on one GPU, so the servers must run on other
  GPUs than the trainer's.
* ``GlooGroup`` (``--transfer-backend atropos_gloo``): atroposlib's ``atropos_gloo`` backend for vLLM
  servers without a GPU (its worker extension registers it): the trainer hosts a TCP store that the
  workers join, and a gloo group carries the broadcast. ``device_type="cuda"`` builds a group that
  serves only CUDA tensors (gloo behind NCCL's device rule), for tests on machines without a GPU.

Joining blocks until every worker has joined, and a server that refused its set-up never will: the
join runs in a background thread while ``abandon`` (the servers' answers) and the deadline are
watched, so the trainer gets one line instead of a hang.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Optional

import torch

from atroposlib.errors import WeightTransferError
from atroposlib.utils.nccl import NcclComm, NcclLibrary, encode_unique_id

Abandon = Callable[[], Optional[str]]  # a reason to stop waiting (a server's error), or None


def _join(what: str, work: Callable[[], Any], timeout_s: float, abandon: Abandon) -> Any:
    """Run ``work`` (a blocking rendezvous) in a daemon thread; return its result, or raise
    ``WeightTransferError`` when it fails, ``abandon`` gives a reason, or ``timeout_s`` passes."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # reported to the caller below
            box["error"] = e

    thread = threading.Thread(target=run, name=f"transfer-{what}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while thread.is_alive():
        thread.join(0.05)
        reason = abandon()
        if reason is not None and thread.is_alive():
            raise WeightTransferError(f"transfer: {what} abandoned: {reason}")
        if time.monotonic() > deadline and thread.is_alive():
            raise WeightTransferError(
                f"transfer: {what}: the servers' workers did not join within {timeout_s:.0f} s"
            )
    if "error" in box:
        e = box["error"]
        raise WeightTransferError(
            f"transfer: {what} failed: {str(e).strip().splitlines()[0]}"
        ) from e
    return box.get("value")


def _wait_for(
    done: Callable[[], bool],
    what: str,
    timeout_s: float,
    abandon: Abandon,
    on_give_up: Callable[[], None],
) -> None:
    """Poll ``done`` until it is true; on ``abandon``'s reason or the deadline call ``on_give_up``
    and raise ``WeightTransferError``."""
    deadline = time.monotonic() + timeout_s
    pause = 0.0005
    while not done():
        reason = abandon()
        if reason is not None:
            on_give_up()
            raise WeightTransferError(f"transfer: a server failed the update: {reason}")
        if time.monotonic() > deadline:
            on_give_up()
            raise WeightTransferError(
                f"transfer: {what} did not complete within {timeout_s:.0f} s (a worker stopped "
                "taking part)"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


class TransferGroup(ABC):
    """Rank 0 of a group with the servers' workers (ranks 1..world_size-1)."""

    backend: str  # the server's --weight-transfer-config backend
    device: torch.device  # where tensors to broadcast must be

    @abstractmethod
    def init_info(self, rank_offset: int, world_size: int, timeout_s: float) -> dict[str, Any]:
        """The ``init_info`` of ``/init_weight_transfer_engine`` for a server whose first worker is
        rank ``rank_offset`` (only fields the backend's init info declares: vLLM refuses others)."""

    @abstractmethod
    def connect(self, world_size: int, timeout_s: float, abandon: Abandon) -> None:
        """Join as rank 0 (the servers were asked to join concurrently)."""

    @abstractmethod
    def broadcast(self, tensor: torch.Tensor, timeout_s: float, abandon: Abandon) -> None:
        """Send ``tensor`` (on ``device``) to every worker; stop waiting when ``abandon`` gives a
        reason (a server's update failed: its workers will not receive) or after ``timeout_s``."""

    @abstractmethod
    def abandon(self) -> None:
        """Leave the group at once after a failure, without waiting for it."""

    @abstractmethod
    def close(self) -> None:
        """Leave the group, waiting (boundedly) for anything still running to end."""


class GlooGroup(TransferGroup):
    backend = "atropos_gloo"

    def __init__(self, master_address: str, device_type: str = "cpu", session: str = "") -> None:
        self.device = torch.device(device_type)
        self.master_address = master_address
        # port 0: the OS picks a free one; the store lives as long as this object
        self.store = torch.distributed.TCPStore(
            master_address, 0, None, True, timeout=timedelta(seconds=300), wait_for_workers=False
        )
        self.session = session or f"atropos-transfer-{time.time_ns()}"
        self.group: Any = None
        self.gloo: Any = None  # the gloo backend behind ``group`` (the same object on CPU)
        self._teardowns: list[threading.Thread] = []
        self.timeout_s = 0.0

    def init_info(self, rank_offset: int, world_size: int, timeout_s: float) -> dict[str, Any]:
        return {
            "master_address": self.master_address,
            "master_port": int(self.store.port),
            "session": self.session,
            "rank_offset": rank_offset,
            "world_size": world_size,
            "timeout_s": timeout_s,
        }

    def connect(self, world_size: int, timeout_s: float, abandon: Abandon) -> None:
        import torch.distributed as dist

        # gloo's own limit a little later than ours, so the deadline below is the one that speaks
        self.timeout_s = timeout_s
        timeout = timedelta(seconds=timeout_s + 5)
        prefixed = dist.PrefixStore(self.session, self.store)

        def join() -> tuple[Any, Any]:
            gloo = dist.ProcessGroupGloo(prefixed, 0, world_size, timeout)
            if self.device.type == "cpu":
                return gloo, gloo
            # NCCL's device rule: a group that has a backend for CUDA tensors only
            group = dist.ProcessGroup(prefixed, 0, world_size)
            group._register_backend(self.device, dist.ProcessGroup.BackendType.GLOO, gloo)
            return group, gloo

        self.group, self.gloo = _join("joining the gloo group", join, timeout_s, abandon)

    def broadcast(self, tensor: torch.Tensor, timeout_s: float, abandon: Abandon) -> None:
        import torch.distributed as dist

        if self.group is None:
            raise WeightTransferError("transfer: broadcast before the group was formed")
        options = dist.BroadcastOptions()
        options.rootRank = 0
        try:
            work = self.group.broadcast([tensor], options)
        except RuntimeError as e:
            raise WeightTransferError(
                f"transfer: broadcast failed: {str(e).strip().splitlines()[0]}"
            ) from e
        _wait_for(work.is_completed, "a broadcast", timeout_s, abandon, self.abandon)
        try:
            work.wait()  # completed: raises what the operation failed with, if it failed
        except RuntimeError as e:
            self.abandon()
            raise WeightTransferError(
                f"transfer: broadcast failed: {str(e).strip().splitlines()[0]}"
            ) from e

    def abandon(self) -> None:
        """Leave the group without waiting. Aborting or destroying a gloo group with an operation
        still in flight waits for that operation (until the peer leaves or its own timeout,
        ``timeout_s`` + 5 s), so both happen in a background thread that holds the last
        references."""
        group, gloo = self.group, self.gloo
        self.group = self.gloo = None
        if gloo is None:
            return

        held = [group, gloo]
        del group, gloo

        def teardown() -> None:
            try:
                held[1].abort()
            except RuntimeError:
                pass
            held.clear()  # the last references go here, in this thread

        thread = threading.Thread(target=teardown, name="transfer-group-teardown", daemon=True)
        thread.start()
        self._teardowns.append(thread)

    def wait_for_teardown(self, timeout_s: float) -> None:
        """Before the process exits: a gloo group still being torn down when the interpreter ends
        aborts the process (``terminate called without an active exception``)."""
        deadline = time.monotonic() + timeout_s
        for thread in self._teardowns:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self.abandon()
        self.wait_for_teardown(self.timeout_s + 10)


class NcclGroup(TransferGroup):
    backend = "nccl"

    def __init__(self, device: torch.device, library: Optional[NcclLibrary] = None) -> None:
        if device.type != "cuda":
            raise WeightTransferError(
                f"transfer: the nccl backend needs the trainer on a CUDA device, not {device} "
                "(--transfer-backend atropos_gloo serves vLLM's CPU build)"
            )
        self.device = device
        self.lib = library or NcclLibrary()
        self.unique_id = self.lib.unique_id()
        self.comm: Optional[NcclComm] = None

    def init_info(self, rank_offset: int, world_size: int, timeout_s: float) -> dict[str, Any]:
        # vLLM's NCCLWeightTransferInitInfo; unpacked: one broadcast per tensor, in update order
        return {
            "nccl_unique_id_b64": encode_unique_id(self.unique_id),
            "rank_offset": rank_offset,
            "world_size": world_size,
            "packed": False,
        }

    def connect(self, world_size: int, timeout_s: float, abandon: Abandon) -> None:
        def join() -> int:
            torch.cuda.set_device(self.device)  # the calling thread's device: the comm's
            return self.lib.init_rank(self.unique_id, world_size, 0)

        handle = _join("joining the NCCL communicator", join, timeout_s, abandon)
        self.comm = comm = NcclComm(self.lib, handle, self.device)
        done = comm.all_reduce_warmup()
        _wait_for(done.query, "the warm-up all-reduce", timeout_s, abandon, comm.abort)

    def broadcast(self, tensor: torch.Tensor, timeout_s: float, abandon: Abandon) -> None:
        if self.comm is None:
            raise WeightTransferError("transfer: broadcast before the communicator was formed")
        comm = self.comm
        done = comm.broadcast(tensor)
        _wait_for(done.query, "a broadcast", timeout_s, abandon, comm.abort)

    def abandon(self) -> None:
        if self.comm is not None:
            self.comm.abort()  # ncclCommAbort: ends what is in flight at once
            self.comm = None

    def close(self) -> None:
        if self.comm is not None:
            self.comm.close()
            self.comm = None


def make_group(backend: str, device: torch.device, master_address: str) -> TransferGroup:
    """The trainer's end for the servers' ``--weight-transfer-config`` backend."""
    if backend == "nccl":
        return NcclGroup(device)
    return GlooGroup(master_address)  # the weights go through host memory


__all__ = ["GlooGroup", "NcclGroup", "TransferGroup", "make_group"]

"""The few NCCL calls atroposlib makes itself, through ctypes: the trainer's end of vLLM's NCCL weight
transfer (and the stand-in worker's end in ``atroposlib.testing.fake_weight_transfer``).

vLLM's workers join an NCCL communicator with the trainer from a unique id the trainer mints
(``nccl_unique_id_b64`` in ``/init_weight_transfer_engine``: vLLM's rendezvous for trainers that are not
vLLM processes). torch.distributed cannot join a communicator from a given id, so the trainer calls
NCCL's C API (nccl.h) directly: ``ncclGetUniqueId``, ``ncclCommInitRank``, ``ncclAllReduce`` (the
one-element warm-up vLLM's communicator issues right after init), ``ncclBroadcast``,
``ncclCommAbort``/``ncclCommDestroy``. The library is the one torch's CUDA build already loaded
(``libnccl.so.2`` from the ``nvidia-nccl`` wheel), or ``ATROPOS_NCCL_LIBRARY``.

NCCL's collectives are asynchronous on a CUDA stream: ``NcclComm`` enqueues each on its own stream
and returns a CUDA event; the caller polls it with a deadline and aborts the communicator when the
deadline passes or a peer has failed (a peer that died never completes its side), so a transfer
fails with one line instead of hanging (``transfer_group``).
"""

from __future__ import annotations

import base64
import ctypes
import os
from typing import Any, Optional

from atroposlib.errors import WeightTransferError

UNIQUE_ID_BYTES = 128
# ncclDataType_t and ncclRedOp_t (nccl.h)
_NCCL_DTYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "int64": 4,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
_NCCL_SUM = 0


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * UNIQUE_ID_BYTES)]


def nccl_dtype(torch_dtype: Any) -> int:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _NCCL_DTYPES:
        raise WeightTransferError(f"nccl: no NCCL type for {name}")
    return _NCCL_DTYPES[name]


class NcclLibrary:
    """``libnccl.so.2`` with the signatures of the calls used here."""

    def __init__(self, path: Optional[str] = None) -> None:
        import torch  # loads the CUDA build's NCCL, which CDLL then finds by its soname

        del torch
        path = path or os.environ.get("ATROPOS_NCCL_LIBRARY") or "libnccl.so.2"
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise WeightTransferError(
                f"nccl: cannot load {path} ({e}); the trainer needs torch's CUDA build (it brings "
                "NCCL) or ATROPOS_NCCL_LIBRARY"
            ) from e
        lib = self.lib
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        lib.ncclGetErrorString.argtypes = [ctypes.c_int]
        lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
        lib.ncclCommInitRank.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            _UniqueId,
            ctypes.c_int,
        ]
        collective: list[Any] = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.ncclAllReduce.argtypes = [*collective, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.ncclBroadcast.argtypes = [*collective, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.ncclCommAbort.argtypes = [ctypes.c_void_p]
        lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
        for fn in (
            lib.ncclGetVersion,
            lib.ncclGetUniqueId,
            lib.ncclCommInitRank,
            lib.ncclAllReduce,
            lib.ncclBroadcast,
            lib.ncclCommAbort,
            lib.ncclCommDestroy,
        ):
            fn.restype = ctypes.c_int

    def check(self, result: int, what: str) -> None:
        if result != 0:
            reason = self.lib.ncclGetErrorString(result).decode(errors="replace")
            raise WeightTransferError(f"nccl: {what} failed: {reason} (ncclResult {result})")

    def version(self) -> int:
        v = ctypes.c_int()
        self.check(self.lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
        return v.value

    def unique_id(self) -> bytes:
        uid = _UniqueId()
        self.check(self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        return bytes(ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES))

    def init_rank(self, unique_id: bytes, world_size: int, rank: int) -> int:
        """``ncclCommInitRank``: blocks until every rank has joined."""
        uid = _UniqueId()
        ctypes.memmove(ctypes.addressof(uid), unique_id, UNIQUE_ID_BYTES)
        comm = ctypes.c_void_p()
        self.check(
            self.lib.ncclCommInitRank(ctypes.byref(comm), world_size, uid, rank),
            "ncclCommInitRank",
        )
        return int(comm.value or 0)


def encode_unique_id(unique_id: bytes) -> str:
    """The id as vLLM's ``nccl_unique_id_b64`` expects it: standard (not URL-safe) base64."""
    return base64.b64encode(unique_id).decode("ascii")


class NcclComm:
    """One communicator, on the current CUDA device, with deadline-bounded collectives."""

    def __init__(self, lib: NcclLibrary, comm: int, device: Any) -> None:
        import torch

        self.lib, self.comm, self.device = lib, ctypes.c_void_p(comm), device
        self.stream = torch.cuda.Stream(device=device)
        self.broken = False

    def _done(self) -> Any:
        """A CUDA event recorded after what was enqueued on the stream (poll its ``query``)."""
        import torch

        done = torch.cuda.Event()
        done.record(self.stream)
        return done

    def all_reduce_warmup(self) -> Any:
        """The one-element float32 sum vLLM's communicator issues right after it joins; returns the
        event that completes with it."""
        import torch

        data = torch.zeros(1, dtype=torch.float32, device=self.device)
        out = torch.empty_like(data)
        with torch.cuda.stream(self.stream):
            self.lib.check(
                self.lib.lib.ncclAllReduce(
                    data.data_ptr(),
                    out.data_ptr(),
                    1,
                    _NCCL_DTYPES["float32"],
                    _NCCL_SUM,
                    self.comm,
                    self.stream.cuda_stream,
                ),
                "ncclAllReduce (warm-up)",
            )
        data.record_stream(self.stream)
        out.record_stream(self.stream)
        return self._done()

    def broadcast(self, tensor: Any) -> Any:
        """Enqueue the broadcast of ``tensor`` (a contiguous CUDA tensor on this device) from rank 0:
        sent by rank 0, received into it by the others; returns the event that completes with it."""
        import torch

        if tensor.device != self.device:
            raise WeightTransferError(f"nccl: a tensor on {tensor.device}, not on {self.device}")
        self.stream.wait_stream(torch.cuda.current_stream(self.device))  # tensor is ready
        with torch.cuda.stream(self.stream):
            self.lib.check(
                self.lib.lib.ncclBroadcast(
                    tensor.data_ptr(),
                    tensor.data_ptr(),
                    tensor.numel(),
                    nccl_dtype(tensor.dtype),
                    0,
                    self.comm,
                    self.stream.cuda_stream,
                ),
                "ncclBroadcast",
            )
        tensor.record_stream(self.stream)  # the allocator keeps it until the send is done
        return self._done()

    def abort(self) -> None:
        if self.comm.value and not self.broken:
            self.broken = True
            self.lib.lib.ncclCommAbort(self.comm)

    def close(self) -> None:
        if self.comm.value and not self.broken:
            self.lib.lib.ncclCommDestroy(self.comm)
        self.comm = ctypes.c_void_p()


__all__ = ["NcclComm", "NcclLibrary", "encode_unique_id", "nccl_dtype"]

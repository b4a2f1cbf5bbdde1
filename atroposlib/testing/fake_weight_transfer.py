"""A stand-in for a vLLM server's weight-transfer routes, for tests of the trainer's ``nccl`` refresh
mode on machines without vLLM: real HTTP on loopback, a real gloo group, vLLM's rules.

``python -m atroposlib.testing.fake_weight_transfer --port P --out FILE [--mode MODE]`` serves
``GET /get_world_size`` (1), ``POST /init_weight_transfer_engine`` (joins the trainer's group as
atroposlib's ``atropos_gloo`` backend does: the trainer's TCP store, key prefix ``session``, rank
``rank_offset``; any other field is refused, as vLLM refuses fields its init info does not declare),
``/pause``, ``/resume``, ``/start_weight_update``, ``/update_weights`` (receives each named tensor by
broadcast from rank 0), ``/finish_weight_update`` (records ``weight_version`` and writes what it
received to FILE with ``torch.save``), ``GET /weight_info`` and ``/shutdown_weight_transfer_engine``;
also ``POST /update_weights_from_disk`` (recorded: the disk path a fallback takes) and ``GET /state``.
Out of order calls get vLLM's errors (500 with its message). ``--mode``:

* ``ok``: as above;
* ``not-configured``: every weight-transfer route answers vLLM's "Weight transfer not configured";
* ``never-join``: ``/init_weight_transfer_engine`` accepts and then never joins (nor answers);
* ``fail-update``: ``/update_weights`` fails (500) after receiving two tensors, as a worker would;
* ``stall-update``: ``/update_weights`` never receives anything and never answers.

``--device cuda:N`` makes it vLLM's ``nccl`` backend instead (``nccl_unique_id_b64`` rendezvous, the
warm-up all-reduce, unpacked broadcasts into that GPU; ``atroposlib.utils.nccl``), keeping a checksum of
what it received (``GET /state``) rather than the tensors: ``bench/gpu_check.py``'s transfer part, on a
machine with two GPUs and no vLLM.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

NOT_CONFIGURED = (
    "Weight transfer not configured. Please set weight_transfer_config to enable weight transfer."
)
INIT_FIELDS = {"master_address", "master_port", "rank_offset", "world_size", "session", "timeout_s"}
# vLLM's NCCLWeightTransferInitInfo (its nccl backend), for --device cuda:N
NCCL_INIT_FIELDS = {
    "master_address",
    "master_port",
    "rank_offset",
    "world_size",
    "nccl_unique_id_b64",
    "packed",
    "packed_buffer_size_bytes",
    "packed_num_buffers",
}


class FakeWorker:
    """The worker side: vLLM's state rules and the gloo receiving end."""

    def __init__(self, mode: str, out: str, device: str = "cpu") -> None:
        self.mode, self.out, self.device = mode, out, device
        self.nccl: Any = None  # the NCCL communicator (--device cuda:N)
        self.checksum = 0.0
        self.group: Any = None
        self.store: Any = None
        self.active = False
        self.version: Any = None
        self.paused = False
        self.received: dict[str, Any] = {}
        self.disk_loads: list[str] = []
        self.lock = threading.Lock()

    def init(self, info: dict[str, Any]) -> None:
        import torch.distributed as dist

        if self.device != "cpu":
            self._init_nccl(info)
            return
        unknown = set(info) - INIT_FIELDS
        if unknown:
            raise ValueError(
                f"Invalid init_info for GlooWeightTransferEngine: __init__() got an unexpected "
                f"keyword argument {sorted(unknown)[0]!r}"
            )
        if self.mode == "never-join":
            time.sleep(3600)
        timeout = timedelta(seconds=float(info.get("timeout_s", 60)))
        self.store = dist.TCPStore(
            info["master_address"], int(info["master_port"]), None, False, timeout=timeout
        )
        prefixed = dist.PrefixStore(info.get("session", "atropos-transfer"), self.store)
        self.group = dist.ProcessGroupGloo(
            prefixed, int(info["rank_offset"]), int(info["world_size"]), timeout
        )

    def _init_nccl(self, info: dict[str, Any]) -> None:
        """Join as vLLM's nccl backend does from a unique id: rank ``rank_offset`` on this device,
        then the one-element warm-up all-reduce."""
        import base64

        import torch

        from atroposlib.utils.nccl import NcclComm, NcclLibrary

        unknown = set(info) - NCCL_INIT_FIELDS
        if unknown or "nccl_unique_id_b64" not in info:
            raise ValueError(f"Invalid init_info for NCCLWeightTransferEngine: {sorted(info)}")
        if info.get("packed"):
            raise ValueError("this stand-in receives unpacked broadcasts only")
        device = torch.device(self.device)
        torch.cuda.set_device(device)
        lib = NcclLibrary()
        uid = base64.b64decode(info["nccl_unique_id_b64"], validate=True)
        handle = lib.init_rank(uid, int(info["world_size"]), int(info["rank_offset"]))
        self.nccl = NcclComm(lib, handle, device)
        self.nccl.all_reduce_warmup().synchronize()
        self.group = self.nccl

    def start(self) -> None:
        if self.group is None:
            raise RuntimeError(NOT_CONFIGURED)
        if self.active:
            raise RuntimeError(
                "start_weight_update called while a weight update is already active. Call "
                "finish_weight_update first."
            )
        self.active = True

    def update(self, info: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist

        if not self.active:
            raise RuntimeError("start_weight_update must be called before update_weights.")
        names, dtypes, shapes = info["names"], info["dtype_names"], info["shapes"]
        if not (len(names) == len(dtypes) == len(shapes)):
            self.active = False
            raise ValueError("`dtype_names` and `shapes` should be of the same size as `names`")
        options = dist.BroadcastOptions()
        options.rootRank = 0
        if self.nccl is not None:
            torch.cuda.set_device(self.nccl.device)  # this request's thread: the comm's device
        if self.mode == "stall-update":
            time.sleep(3600)  # a worker stuck before receiving anything, its call never returning
        try:
            for i, (name, dtype, shape) in enumerate(zip(names, dtypes, shapes, strict=True)):
                if self.mode == "fail-update" and i == 2:
                    raise RuntimeError("simulated worker failure while loading " + name)
                t = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
                if self.nccl is not None:
                    self.nccl.broadcast(t).synchronize()
                    self.checksum += float(t.double().sum())  # GPU runs keep only a checksum
                else:
                    self.group.broadcast([t], options).wait()
                    self.received[name] = t
        except BaseException:
            self.active = False
            raise

    def finish(self, version: Any) -> None:
        import torch

        if not self.active:
            raise RuntimeError(
                "finish_weight_update called without a matching start_weight_update."
            )
        self.active = False
        self.version = version
        if self.nccl is None:
            torch.save({"weights": self.received, "version": version}, self.out)


def _handler(worker: FakeWorker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("content-length") or 0)
            return json.loads(self.rfile.read(n) or b"{}") if n else {}

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/get_world_size":
                self._answer(200, {"world_size": 1})
            elif path == "/weight_info":
                self._answer(200, {"weight_version": worker.version})
            elif path == "/health":
                self._answer(200, {})
            elif path == "/state":  # for tests: what the worker is doing
                self._answer(
                    200,
                    {"paused": worker.paused, "active": worker.active, "checksum": worker.checksum},
                )
            else:
                self._answer(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._body()
            transfer = {
                "/init_weight_transfer_engine",
                "/start_weight_update",
                "/update_weights",
                "/finish_weight_update",
            }
            try:
                if worker.mode == "not-configured" and path in transfer:
                    raise RuntimeError(NOT_CONFIGURED)
                if path == "/init_weight_transfer_engine":
                    worker.init(body["init_info"])
                elif path == "/start_weight_update":
                    worker.start()
                elif path == "/update_weights":
                    worker.update(body["update_info"])
                elif path == "/finish_weight_update":
                    worker.finish(body.get("weight_version"))
                elif path == "/pause":
                    worker.paused = True
                elif path == "/resume":
                    worker.paused = False
                elif path == "/shutdown_weight_transfer_engine":
                    worker.group = None
                elif path == "/update_weights_from_disk":  # the disk path a fallback takes
                    worker.disk_loads.append(body["model_path"])
                    self._answer(200, {"success": True, "weights_version": len(worker.disk_loads)})
                    return
                else:
                    self._answer(404, {"detail": "Not Found"})
                    return
            except Exception as e:  # vLLM answers a worker's exception as a 500 with its message
                self._answer(500, {"error": f"{type(e).__name__}: {e}"})
                return
            self._answer(200, {"message": "ok"})

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--mode",
        choices=["ok", "not-configured", "never-join", "fail-update", "stall-update"],
        default="ok",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        help="cpu: the atropos_gloo backend; cuda:N: vLLM's nccl backend on that GPU (the trainer "
        "on another one), receiving into GPU memory and keeping only a checksum",
    )
    a = ap.parse_args()
    worker = FakeWorker(a.mode, a.out, a.device)
    server = ThreadingHTTPServer(("127.0.0.1", a.port), _handler(worker))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()

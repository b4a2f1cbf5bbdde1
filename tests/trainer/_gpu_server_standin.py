"""A stand-in for a vLLM server on a GPU, for restart mode's memory checks (``--inference-command``).

``python _gpu_server_standin.py --port P --hold-dir D --claim BYTES --linger S``: the API process
answers ``GET /health`` on 127.0.0.1:P and starts an "engine" child in its own process group, as
vLLM does. The engine "holds" ``BYTES`` of the GPU by writing ``D/<its pid>`` (the memory stand-in
counts the files of live processes) and, on SIGTERM, keeps them for ``S`` more seconds before it
exits: vLLM's engine outliving its API process. At start the API process records in
``D/launches.jsonl`` how many other live holders it found: a launch while the old engine still
held its memory shows up there.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def live_holders(hold_dir: Path) -> list[int]:
    pids = []
    for f in hold_dir.glob("[0-9]*"):
        pid = int(f.name)
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            pids.append(pid)
    return pids


def engine(hold_dir: Path, claim: int, linger: float) -> None:
    mine = hold_dir / str(os.getpid())

    def leave(*_: object) -> None:
        time.sleep(linger)  # still holding the memory
        mine.unlink(missing_ok=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    mine.write_text(str(claim))
    while True:
        time.sleep(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hold-dir", type=Path, required=True)
    ap.add_argument("--claim", type=int, required=True)
    ap.add_argument("--linger", type=float, default=0.0)
    ap.add_argument("--model", default="")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--engine", action="store_true")
    a = ap.parse_args()
    if a.engine:
        engine(a.hold_dir, a.claim, a.linger)
        return
    others = live_holders(a.hold_dir)
    with open(a.hold_dir / "launches.jsonl", "a") as f:
        f.write(json.dumps({"model": a.model, "others_holding": len(others)}) + "\n")
    args = [
        sys.executable,
        __file__,
        "--engine",
        "--port",
        str(a.port),
        "--hold-dir",
        str(a.hold_dir),
        "--claim",
        str(a.claim),
        "--linger",
        str(a.linger),
    ]
    child = subprocess.Popen(args)  # same process group, like vLLM's EngineCore
    while not (a.hold_dir / str(child.pid)).exists():  # healthy once the engine holds its memory
        time.sleep(0.02)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # the API process leaves at once
    http.server.HTTPServer(("127.0.0.1", a.port), Health).serve_forever()


if __name__ == "__main__":
    main()

"""One supervised process, the body of each Ray actor of the Ray backend (plain Python: the backend
wraps it with ``ray.remote``; nothing here imports ray at module level).

The child runs in its own session with stdout and stderr appended to its log in the run directory (a
shared file system). A thread watches it: an env worker or inference server that exits with an error is
restarted after a backoff that doubles per crash (``backoff_s`` .. ``max_backoff_s``); more than
``max_restarts`` crashes inside ``window_minutes`` leaves it ``failed`` with a one-line message, which
the launcher turns into the end of the run. ``stop`` ends the child's whole process group (SIGTERM,
SIGKILL after the grace period).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Optional

from atroposlib.launch.spawn import start_logged
from atroposlib.utils.procs import group_stopped, stop_groups


def node_ip() -> str:
    """The address of the node this process runs on, as Ray sees it (inside a Ray worker)."""
    import ray

    return str(ray.util.get_node_ip_address())


class ProcessSupervisor:
    """Runs one component's process and keeps it running (see the module docstring)."""

    def __init__(
        self, name: str, role: str, log: str, restart: bool, supervision: dict[str, float]
    ) -> None:
        self.name, self.role, self.log, self.restart = name, role, log, restart
        self.sup = supervision
        self.popen: Optional[subprocess.Popen[bytes]] = None
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.state = "pending"
        self.restarts = 0
        self.exit_code: Optional[int] = None
        self.message = ""
        self.crash_notes: list[
            str
        ] = []  # every "exited ...; restarting" line, for the launcher to print
        self.crashes: list[float] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    # --- where it runs ---------------------------------------------------------------------
    def where(self) -> dict[str, Any]:
        import ray

        ip = node_ip()
        node = ray.get_runtime_context().get_node_id()
        return {"ip": ip, "host": socket.gethostname(), "actor_pid": os.getpid(), "node_id": node}

    def reserve_port(self) -> int:
        """A TCP port free on this node's address right now (the component will listen on it)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((node_ip(), 0))
            return int(s.getsockname()[1])

    # --- the child -------------------------------------------------------------------------
    def _spawn(self) -> None:
        self.popen = start_logged(self.argv, self.env, Path(self.log), host=socket.gethostname())
        self.state, self.exit_code = "running", None

    def start(self, argv: list[str], env: dict[str, str]) -> int:
        """Start the child (``env`` is added to this worker's environment); returns its pid."""
        self.argv = argv
        self.env = dict(os.environ)
        for key, value in env.items():
            if key == "PYTHONPATH" and self.env.get(key):
                value = value + os.pathsep + self.env[key]
            self.env[key] = value
        with self._lock:
            self._spawn()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        assert self.popen is not None
        return self.popen.pid

    def _crashed(self, rc: int) -> Optional[float]:
        """Book a crash; the delay before the restart, or None when the limit is passed."""
        now = time.monotonic()
        window = float(self.sup["window_minutes"]) * 60
        self.crashes = [t for t in self.crashes if now - t < window] + [now]
        if len(self.crashes) > int(self.sup["max_restarts"]):
            self.state = "failed"
            self.message = (
                f"{self.name} crashed {len(self.crashes)} times in "
                f"{float(self.sup['window_minutes']):g} min (last exit code {rc}); see {self.log}"
            )
            return None
        backoff = float(self.sup["backoff_s"]) * 2 ** (len(self.crashes) - 1)
        return min(float(self.sup["max_backoff_s"]), backoff)

    def _watch(self) -> None:
        while not self._stopping.is_set():
            popen = self.popen
            assert popen is not None
            rc = popen.poll()
            if rc is None:
                self._stopping.wait(0.1)
                continue
            with self._lock:
                if self._stopping.is_set():
                    return
                self.exit_code = rc
                if rc == 0 and self.role in ("env", "trainer"):
                    self.state = "done"  # an env worker at its total_steps, the trainer finished
                    return
                if not self.restart:
                    self.state = "failed"
                    what = {"trainer": "the trainer", "api": "the API"}.get(self.role, self.name)
                    if self.name.startswith("trainer-node"):
                        what = f"the trainer ({self.name})"
                    self.message = f"{what} exited with code {rc}; see {self.log}"
                    return
                delay = self._crashed(rc)
                if delay is None:
                    return
                self.state = "restarting"
                self.message = f"{self.name} exited with code {rc}; restarting in {delay:.1f}s"
                self.crash_notes.append(self.message)
            if self._stopping.wait(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self.restarts += 1
                self._spawn()

    def status(self) -> dict[str, Any]:
        popen = self.popen
        running = popen is not None and popen.poll() is None
        return {
            "state": self.state,
            "stopped": bool(running and popen is not None and group_stopped(popen.pid)),
            "restarts": self.restarts,
            "pid": self.popen.pid if self.popen is not None else None,
            "exit_code": self.exit_code,
            "message": self.message,
            "crash_notes": list(self.crash_notes),
        }

    def stop(self, timeout: float) -> dict[str, Any]:
        """End the child's process group (no restart after this); returns the final status."""
        self._stopping.set()
        with self._lock:
            popen = self.popen
        if popen is not None:
            stop_groups([popen.pid], timeout)
            try:
                popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if self.state in ("running", "restarting", "pending"):
                self.state = "stopped"
                self.exit_code = popen.returncode
        return self.status()


__all__ = ["ProcessSupervisor", "node_ip"]

"""The local backend: every component of a plan as a supervised process on this machine.

Start order: prepare steps, API (wait for /health), inference servers (wait for /health), env workers,
trainer. Stop order: trainer, env workers, inference servers, API last; each component is its own
process group, so a stop reaches everything it started. A crashed env worker or inference server is
restarted after a backoff that doubles per crash; more than ``max_restarts`` crashes inside
``window_minutes`` stops the run. The API or the trainer exiting with an error stops the run; the trainer
exiting 0 ends it. The trainer's metrics are mirrored to ``DIR/metrics.jsonl`` as they are written.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from atroposlib.launch.metrics import mirror_lines
from atroposlib.launch.plan import Component, Plan
from atroposlib.launch.run_loop import Awaited, RunFailed, StopRequested, SupervisedRun
from atroposlib.launch.spawn import package_root, start_logged
from atroposlib.launch.state import write_state
from atroposlib.utils.procs import group_stopped, stop_groups

LOCAL_HOST = "127.0.0.1"
_STOP_ROLES = ("trainer", "env", "inference", "api")


def _localize(text: str) -> str:
    for k in range(64):
        text = text.replace(f"@NODE{k}@", LOCAL_HOST)
    return text


@dataclass
class _Proc:
    comp: Component
    argv: list[str]
    env: dict[str, str]
    url: Optional[str]
    health: Optional[str]
    popen: Optional[subprocess.Popen[bytes]] = None
    state: str = "pending"
    restarts: int = 0
    exit_code: Optional[int] = None
    crashes: list[float] = field(default_factory=list)
    restart_at: Optional[float] = None


class LocalRun(SupervisedRun):
    """Run ``plan`` here. ``run()`` returns the exit status; ``say`` prints the launcher's lines."""

    def __init__(
        self,
        plan: Plan,
        *,
        topology_path: str = "",
        say: Callable[[str], None] = print,
        poll_s: float = 0.25,
    ) -> None:
        self.plan = plan
        self.out = plan.out
        self.sup = plan.topology.supervision
        self.say = say
        self.poll_s = poll_s
        self.topology_path = topology_path
        self.api_url = _localize(plan.api_url)
        self.host = socket.gethostname()
        self.run_state = "starting"
        self.message = ""
        super().__init__()
        base = dict(os.environ)
        base.update(plan.topology.env)
        root = package_root()
        base["PYTHONPATH"] = os.pathsep.join(p for p in (root, base.get("PYTHONPATH", "")) if p)
        self.procs: list[_Proc] = []
        for c in plan.components:
            env = dict(base)
            for k, v in c.env.items():
                env[k] = v + os.pathsep + env[k] if k == "PYTHONPATH" and env.get(k) else v
            self.procs.append(
                _Proc(
                    c,
                    [_localize(a) for a in c.argv],
                    env,
                    _localize(c.url) if c.url else None,
                    _localize(c.health) if c.health else None,
                    state="external" if c.external else "pending",
                )
            )
        self._mirrored = 0

    # --- state file ------------------------------------------------------------------------
    def _row(self, p: _Proc) -> dict[str, Any]:
        return {
            "name": p.comp.name,
            "role": p.comp.role,
            "where": p.url.split("//")[-1] if p.comp.external and p.url else self.host,
            "state": p.state,
            "restarts": p.restarts,
            "url": p.url,
            "log": str(self.out / p.comp.log) if not p.comp.external else None,
            "pid": p.popen.pid if p.popen is not None else None,
            "exit_code": p.exit_code,
        }

    def save_state(self) -> None:
        write_state(
            self.out,
            {
                "version": 1,
                "backend": "local",
                "topology": self.topology_path,
                "launcher_pid": os.getpid(),
                "state": self.run_state,
                "message": self.message,
                "api_url": self.api_url,
                "metrics": str(self.out / "metrics.jsonl"),
                "components": [self._row(p) for p in self.procs],
            },
        )

    # --- processes -------------------------------------------------------------------------
    def _spawn(self, p: _Proc) -> None:
        p.popen = start_logged(p.argv, p.env, self.out / p.comp.log)
        p.state, p.exit_code, p.restart_at = "running", None, None
        self.save_state()

    def _wait_health(self, procs: list[_Proc]) -> None:
        waiting = [p for p in procs if p.health]
        for p in waiting:
            p.state = "starting"
        self._await_health([self._awaited(p) for p in waiting])

    def _awaited(self, p: _Proc) -> Awaited:
        def exit_code() -> Optional[int]:
            assert p.popen is not None
            rc = p.popen.poll()
            if rc is not None:
                p.state, p.exit_code = "failed", rc
            return rc

        def ready() -> None:
            p.state = "running"
            self.say(f"[launch] {p.comp.name} ready at {p.url}")

        assert p.health is not None
        return Awaited(
            p.comp.name, p.health, p.comp.startup_timeout, self.out / p.comp.log, exit_code, ready
        )

    def _prepare(self) -> None:
        for p in self.procs:
            if p.comp.role != "prepare":
                continue
            if p.comp.creates and Path(p.comp.creates).exists():
                p.state = "skipped"
                continue
            self.say(f"[launch] {p.comp.name}: {' '.join(p.argv)}")
            self._spawn(p)
            assert p.popen is not None
            while p.popen.poll() is None:
                if self._stop.wait(0.1):
                    stop_groups([p.popen.pid], self.sup.stop_timeout_s)
                    p.popen.wait()
                    raise StopRequested()
            p.exit_code = p.popen.returncode
            p.state = "done" if p.exit_code == 0 else "failed"
            self.save_state()
            if p.exit_code != 0:
                raise RunFailed(
                    f"{p.comp.name} exited with code {p.exit_code}; see {self.out / p.comp.log}"
                )

    def _start(self) -> None:
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        self.save_state()
        self._prepare()
        for role in ("api", "inference", "env", "trainer"):
            group = [p for p in self.procs if p.comp.role == role and not p.comp.external]
            for p in group:
                self._check_stop()
                self._spawn(p)
            if role in ("api", "inference"):
                self._wait_health(group)
            elif group:
                self.say(f"[launch] started {', '.join(p.comp.name for p in group)}")

    # --- supervision ---------------------------------------------------------------------------
    def _mirror_metrics(self) -> list[str]:
        """Append the trainer's new metrics lines to DIR/metrics.jsonl; returns the new lines."""
        return mirror_lines(self.plan.metrics_source, self.out / "metrics.jsonl")

    def _crashed(self, p: _Proc, rc: int) -> None:
        now = time.monotonic()
        window = self.sup.window_minutes * 60
        p.crashes = [t for t in p.crashes if now - t < window] + [now]
        p.exit_code = rc
        if len(p.crashes) > self.sup.max_restarts:
            p.state = "failed"
            raise RunFailed(
                f"{p.comp.name} crashed {len(p.crashes)} times in {self.sup.window_minutes:g} min "
                f"(last exit code {rc}); see {self.out / p.comp.log}"
            )
        delay = min(self.sup.max_backoff_s, self.sup.backoff_s * 2 ** (len(p.crashes) - 1))
        p.state, p.restart_at = "restarting", now + delay
        self.say(f"[launch] {p.comp.name} exited with code {rc}; restarting in {delay:.1f}s")

    def _tick(self) -> Optional[int]:
        """One supervision pass; returns the exit status once the run is over."""
        for p in self.procs:
            if p.popen is None or p.comp.role == "prepare":
                continue
            if p.state == "restarting":
                if p.restart_at is not None and time.monotonic() >= p.restart_at:
                    p.restarts += 1
                    self._spawn(p)
                continue
            if p.state in ("done", "failed", "stopped"):
                continue
            rc = p.popen.poll()
            if rc is None:
                continue
            p.exit_code = rc
            role = p.comp.role
            if role == "trainer":
                if rc == 0:
                    p.state = "done"
                    return 0
                p.state = "failed"
                raise RunFailed(f"the trainer exited with code {rc}; see {self.out / p.comp.log}")
            if role == "api":
                p.state = "failed"
                raise RunFailed(f"the API exited with code {rc}; see {self.out / p.comp.log}")
            if role == "env" and rc == 0:
                p.state = "done"  # finished its total_steps
                continue
            self._crashed(p, rc)
        return None

    def _stalled(self, seconds: float) -> str:
        """Name what stopped: components whose processes are stopped, else the trainer."""
        stopped = [
            p
            for p in self.procs
            if p.popen is not None and p.state == "running" and group_stopped(p.popen.pid)
        ]
        head = f"no trainer step for {seconds:.0f} s{self._last_step()}"
        if stopped:
            names = ", ".join(p.comp.name for p in stopped)
            verb = "is" if len(stopped) == 1 else "are"
            return (
                f"{head}: {names} {verb} stopped (SIGSTOP?); see {self.out / stopped[0].comp.log}"
            )
        log = self.out / "logs" / "trainer.log"
        return f"{head}: the trainer is running but made no progress; see {log}"

    def _stop_all(self) -> None:
        for role in _STOP_ROLES:
            group = [p for p in self.procs if p.comp.role == role and p.popen is not None]
            stop_groups([p.popen.pid for p in group if p.popen], self.sup.stop_timeout_s)
            for p in group:
                assert p.popen is not None
                try:
                    p.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                if p.state in ("running", "starting", "restarting", "pending"):
                    p.state = "stopped"
                    p.exit_code = p.popen.returncode
        self.save_state()

    # --- lookups -------------------------------------------------------------------------------
    def proc(self, name: str) -> Optional[subprocess.Popen[bytes]]:
        for p in self.procs:
            if p.comp.name == name:
                return p.popen
        return None


def run_local(plan: Plan, *, topology_path: str = "", say: Callable[[str], None] = print) -> int:
    return LocalRun(plan, topology_path=topology_path, say=say).run()


if sys.platform == "win32":  # pragma: no cover - process groups are POSIX
    raise ImportError("the local launcher backend needs a POSIX system")

__all__ = ["LocalRun", "RunFailed", "run_local"]

"""The life of one launched run, shared by every backend that supervises from here (local, ray).

``SupervisedRun.run`` starts the components, ticks until the trainer ends, and always stops
everything in order, whatever ended the run: the trainer finishing (exit 0), a component failing for
good (``RunFailed``: one line, exit 1), or Ctrl-C / SIGTERM / ``atropos-launch stop``
(``StopRequested``: exit 128 + signal); both are ``atroposlib.errors`` classes, so a failed launch is an
``AtroposError``. A backend supplies how to start, tick, stop and record; the API and inference servers
it starts are waited for with one rule (``_await_health``: ``utils.readiness``, ``RunFailed`` naming the
log when one exits first or misses its ``startup_timeout``).

Progress: once every component is started, a trainer that writes no new step to its metrics for
``supervision.progress_timeout_s`` ends the run the same way, with one line naming what stopped (the
backend's ``_stalled``) and the command that continues the run.
"""

from __future__ import annotations

import shlex
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.errors import RunFailed, StopRequested
from atroposlib.utils.readiness import wait_until_answering

if TYPE_CHECKING:
    from atroposlib.launch.topology import Supervision


@dataclass
class Awaited:
    """A started component the run waits for before the next role starts: its ``/health`` URL and
    limit, its log, and the backend's two views of it."""

    name: str
    health: str
    timeout: float
    log: Path
    exit_code: Callable[[], Optional[int]]
    """Its exit code once it has ended (or, supervised elsewhere, will not answer); else None."""
    ready: Callable[[], None]
    """Called once it answers."""


class SupervisedRun:
    """The start / tick / stop loop; subclasses implement the hooks below."""

    poll_s: float
    run_state: str
    message: str
    say: Callable[[str], None]
    sup: Supervision
    out: Path
    topology_path: str

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._stop_signal = 0
        self._progress_at: Optional[float] = None  # the last trainer step (or the trainer's start)

    # --- what a backend provides -----------------------------------------------------------
    def _start(self) -> None:
        raise NotImplementedError

    def _tick(self) -> Optional[int]:
        """Supervise once; the exit code when the trainer has finished, else None."""
        raise NotImplementedError

    def _stop_all(self) -> None:
        raise NotImplementedError

    def save_state(self) -> None:
        raise NotImplementedError

    def _mirror_metrics(self) -> Any:
        raise NotImplementedError

    def _close(self) -> None:
        """Release what the backend holds once everything is stopped (default: nothing)."""

    def _backend_args(self) -> list[str]:
        """The ``atropos-launch run`` flags that select this backend (for the resume hint)."""
        return []

    def _stalled(self, seconds: float) -> str:
        """The line that ends a run whose trainer made no step for ``seconds``: what stopped."""
        return f"the trainer made no step for {seconds:.0f} s{self._last_step()}; see {self.out / 'logs'}"

    # --- shared wording -----------------------------------------------------------------------
    def resume_hint(self) -> str:
        """The command that continues this run (API and trainer resume, nothing lost)."""
        topo = self.topology_path or "TOPOLOGY"
        argv = ["atropos-launch", "run", topo, *self._backend_args(), "--out", str(self.out)]
        return " ".join(shlex.quote(a) for a in [*argv, "--resume"])

    def _last_step(self) -> str:
        from atroposlib.launch.metrics import last_step

        row = last_step(self.out / "metrics.jsonl")
        return f" (last: step {row.get('step')})" if row else " (none yet)"

    def _check_progress(self, stepped: bool) -> None:
        now = time.monotonic()
        if stepped or self._progress_at is None:
            self._progress_at = now
            return
        limit = self.sup.progress_timeout_s
        if limit and now - self._progress_at > limit:
            raise RunFailed(f"{self._stalled(limit)}; continue with: {self.resume_hint()}")

    # --- waiting for servers ----------------------------------------------------------------
    def _await_health(self, comps: list[Awaited]) -> None:
        """Wait until each of ``comps`` answers its ``/health`` (``utils.readiness``'s rule), saving
        the state every round; ``RunFailed`` naming the log when one ends first or misses its limit."""
        by_name = {c.name: c for c in comps}

        def exited(name: str) -> Optional[RunFailed]:
            c = by_name[name]
            code = c.exit_code()
            if code is None:
                return None
            return RunFailed(f"{name} exited with code {code} before it answered; see {c.log}")

        def timed_out(name: str, _last: Optional[Exception]) -> RunFailed:
            c = by_name[name]
            return RunFailed(
                f"{name} did not answer {c.health} within {c.timeout:.0f}s; see {c.log}"
            )

        def before_round() -> None:
            self._check_stop()
            self.save_state()

        wait_until_answering(
            {c.name: c.health for c in comps},
            {c.name: c.timeout for c in comps},
            exited=exited,
            timed_out=timed_out,
            ready=lambda name: by_name[name].ready(),
            before_round=before_round,
        )
        self.save_state()

    # --- the loop ---------------------------------------------------------------------------
    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        self._stop_signal = signum
        self._stop.set()

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise StopRequested()

    def _install_signals(self) -> list[tuple[int, Any]]:
        if threading.current_thread() is not threading.main_thread():
            return []
        old: list[tuple[int, Any]] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            old.append((sig, signal.signal(sig, lambda s, _f: self.request_stop(s))))
        return old

    def run(self, on_tick: Optional[Callable[[Any], None]] = None) -> int:
        """Start everything, supervise until the trainer ends, stop everything. Returns the exit
        status: 0 when the trainer finished, 1 when the run failed, 128 + signal when stopped."""
        old = self._install_signals()
        code = 1
        try:
            try:
                self._start()
                self.run_state = "running"
                self.save_state()
                while True:
                    self._check_stop()
                    done = self._tick()
                    stepped = bool(self._mirror_metrics())
                    if on_tick is not None:
                        on_tick(self)
                    if done is not None:
                        code = done
                        self.run_state, self.message = "finished", "the trainer finished"
                        break
                    self._check_progress(stepped)
                    self._stop.wait(self.poll_s)
            except RunFailed as e:
                self.run_state, self.message = "failed", str(e)
                self.say(f"atropos-launch: error: {e}")
                code = 1
            except StopRequested:
                name = signal.Signals(self._stop_signal or signal.SIGTERM).name
                self.run_state, self.message = "stopped", f"stopped by {name}"
                code = 128 + (self._stop_signal or signal.SIGTERM)
            self.run_state = {"running": "stopping"}.get(self.run_state, self.run_state)
            self.save_state()
            self._stop_all()
            self._mirror_metrics()
            self.save_state()
            if self.run_state == "stopped":
                self.say(f"[launch] {self.message}; every component stopped")
            return code
        finally:
            for sig, handler in old:
                signal.signal(sig, handler)
            self._close()


__all__ = ["Awaited", "RunFailed", "StopRequested", "SupervisedRun"]

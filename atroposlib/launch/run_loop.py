"""The life of one launched run, shared by every backend that supervises from here (local, ray).

``SupervisedRun.run`` starts the components, ticks until the trainer ends, and always stops
everything in order, whatever ended the run: the trainer finishing (exit 0), a component failing for
good (``RunFailed``: one line, exit 1), or Ctrl-C / SIGTERM / ``atropos-launch stop``
(``StopRequested``: exit 128 + signal). A backend supplies how to start, tick, stop and record.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any, Optional


class RunFailed(Exception):
    """The run cannot go on; the message is the one line the launcher prints."""


class StopRequested(Exception):
    """Ctrl-C, SIGTERM or ``atropos-launch stop``."""


class SupervisedRun:
    """The start / tick / stop loop; subclasses implement the hooks below."""

    poll_s: float
    run_state: str
    message: str
    say: Callable[[str], None]

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._stop_signal = 0

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
                    self._mirror_metrics()
                    if on_tick is not None:
                        on_tick(self)
                    if done is not None:
                        code = done
                        self.run_state, self.message = "finished", "the trainer finished"
                        break
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


__all__ = ["RunFailed", "StopRequested", "SupervisedRun"]

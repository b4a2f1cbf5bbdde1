"""The sandbox interface a Harbor episode runs in: start, run the model's commands, verify, stop.

One ``Sandbox`` per episode (one Harbor trial). Two implementations, chosen by ``--harbor.sandbox``
(``sandboxes.SANDBOXES``):

* ``host`` (``host_sandbox.HostSandbox``, the default): bubblewrap on this machine's own, read-only
  system; no container runtime needed; the task's Dockerfile is replayed as far as it can be, and a
  task it cannot honour is refused with one line;
* ``podman`` (``harbor_runtime.HarborRuntimeSandbox``): Harbor's own runtime, its podman backend
  building the task's Dockerfile, driven from Harbor's Python 3.12 environment.

The contract, the same for both: ``refusal(task)`` says before anything starts why a task cannot run
(None when it can); ``start`` prepares the trial (a ``SandboxFailure`` of kind ``start`` or
``refused`` when it cannot); ``run`` runs one command under its limits and always answers (a command
past its time limit is killed with every process it started, and the result says ``timed_out``);
``verify`` runs the task's ``tests/test.sh`` and returns the rewards it wrote (``SandboxFailure`` of
kind ``verifier`` or ``no_reward`` otherwise); ``stop`` removes everything the trial made.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Optional

from atroposlib.interop.harbor.bwrap import CommandLimits, CommandResult
from atroposlib.interop.harbor.task import HarborTask


class Sandbox(ABC):
    """One trial of ``task`` (see the module docstring); use as ``async with``."""

    kind = "sandbox"
    """The ``--harbor.sandbox`` value that picks this implementation."""

    def __init__(self, task: HarborTask, trial_dir: Path, limits: CommandLimits) -> None:
        self.task = task
        self.trial_dir = Path(trial_dir)
        self.limits = limits

    @classmethod
    def missing(cls) -> Optional[str]:
        """One line naming what this machine lacks for this kind of sandbox, or None."""
        return None

    @classmethod
    def refusal(cls, task: HarborTask) -> Optional[str]:
        """Why this kind of sandbox cannot run ``task`` (one line), or None."""
        return None

    @abstractmethod
    async def start(self) -> None:
        """Prepare the trial: its folders, the task's environment."""

    @abstractmethod
    async def run(self, command: str, limits: Optional[CommandLimits] = None) -> CommandResult:
        """Run one shell command in the task's working directory under ``limits`` (default: the
        sandbox's)."""

    @abstractmethod
    async def verify(self) -> dict[str, float]:
        """Run the task's verifier; the rewards it wrote."""

    @abstractmethod
    async def stop(self) -> None:
        """Remove the trial (idempotent)."""

    async def __aenter__(self) -> Sandbox:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.stop()


__all__ = ["CommandLimits", "CommandResult", "Sandbox"]

"""Our host sandbox as a Harbor environment backend: ``harbor trial start --env atroposlib.interop.harbor.harbor_backend:HostSandboxEnvironment``.

Harbor (Python >= 3.12, its own environment) runs a trial through a ``BaseEnvironment``; this one is
``host_sandbox.HostSandbox`` (bubblewrap on this machine, no container runtime), so Harbor's own
agents (``oracle``, ``nop``, ...) and verifier run a task the way our env's episodes do, and the two
rewards can be compared. Put the checkout on ``PYTHONPATH``; this module and what it imports need
neither torch nor transformers (only Harbor, pydantic, and atroposlib's leaf modules).

Harbor's side of the contract, as this backend keeps it: ``start`` replays the task's Dockerfile
(a task the host sandbox refuses fails ``_validate_definition`` with the one-line reason, before
anything starts); ``exec`` runs a command in the trial's working directory with the given ``cwd``
and ``env`` (every command runs as the trial's own unprivileged user: ``user`` is not honoured, and
nothing needs root here) and raises ``RuntimeError`` past ``timeout_sec`` as Harbor's docker
backend does, after killing the command and every process it started; ``upload_*``/``download_*``
copy to and from the trial's folders (``/logs``, ``/tests``, ``/solution``, the working directory);
the network is always off (``disable_internet``), also for tasks that allow it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

from harbor.environments.base import (  # type: ignore[import-not-found]
    BaseEnvironment,
    ExecResult,
    SandboxBuildFailedError,
)
from harbor.environments.capabilities import (  # type: ignore[import-not-found]
    EnvironmentCapabilities,
)

from atroposlib.errors import NotAHarborTask, SandboxFailure
from atroposlib.interop.harbor.bwrap import CommandLimits, missing_bwrap
from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir
from atroposlib.interop.harbor.task import HarborTask, read_task

NO_LIMIT_S = 3600.0  # Harbor's commands without a timeout_sec
OUTPUT_BYTES = 64 * 2**20  # Harbor keeps the whole output of its own commands


class HostSandboxEnvironment(BaseEnvironment):  # type: ignore[misc]
    """Harbor's ``BaseEnvironment`` over ``HostSandbox`` (see the module docstring)."""

    _task: HarborTask
    _sandbox: Optional[HostSandbox] = None

    @staticmethod
    def type() -> str:
        return "atroposlib-host-sandbox"

    @classmethod
    def preflight(cls) -> None:
        missing = missing_bwrap()
        if missing:
            raise SystemExit(missing)

    @property
    def capabilities(self) -> Any:
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        try:
            self._task = read_task(Path(self.environment_dir).parent)
        except NotAHarborTask as exc:
            raise SandboxBuildFailedError(str(exc)) from None
        refusal = HostSandbox.refusal(self._task)
        if refusal:
            raise SandboxBuildFailedError(f"task {self._task.name}: {refusal}")

    def _live(self) -> HostSandbox:
        if self._sandbox is None:
            raise RuntimeError("the host sandbox is not started")
        return self._sandbox

    async def start(self, force_build: bool) -> None:
        sandbox = HostSandbox(
            self._task, make_trial_dir(prefix=f"{self._task.name}-"), CommandLimits()
        )
        try:
            await sandbox.start()
        except SandboxFailure as failure:
            await sandbox.stop()
            raise SandboxBuildFailedError(str(failure)) from None
        self._sandbox = sandbox

    async def stop(self, delete: bool) -> None:
        if self._sandbox is not None:
            await self._sandbox.stop()
            self._sandbox = None

    async def exec(
        self,
        command: str,
        cwd: Optional[str] = None,
        env: Optional[dict[str, str]] = None,
        timeout_sec: Optional[int] = None,
        user: str | int | None = None,
    ) -> Any:
        sandbox = self._live()
        limit = float(timeout_sec) if timeout_sec else NO_LIMIT_S
        limits = dataclasses.replace(sandbox.limits, timeout_s=limit, max_output_bytes=OUTPUT_BYTES)
        done = await sandbox.exec(
            command,
            cwd=cwd or self.task_env_config.workdir,
            env=self._merge_env(env) or {},
            limits=limits,
        )
        if done.timed_out:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(stdout=done.output, stderr="", return_code=done.exit_code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._live().upload(Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._live().upload(Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self._live().download(source_path, Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await self._live().download(source_dir, Path(target_dir))


__all__ = ["HostSandboxEnvironment"]

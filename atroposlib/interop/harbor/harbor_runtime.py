"""``HarborRuntimeSandbox``: a trial in Harbor's own runtime, its podman backend (``--harbor.sandbox podman``).

For tasks that need their image built: the task's ``environment/Dockerfile`` is built by podman and
the trial runs in that container, every step done by Harbor's own code (``PodmanEnvironment``, its
``Verifier``) in Harbor's Python 3.12 environment, through ``harbor_bridge`` (one process per trial,
JSON lines over a pipe). What it isolates is what a rootful podman container does here: its own root
file system (the image) and process, mount and network namespaces, no network at all (the bridge's
compose overlay), and each command killed with its process group at its time limit (coreutils'
``timeout`` inside the container). Images come from the local store only: this machine has no
registry, so the shipped tasks start ``FROM debian:bookworm-slim``, which ``scripts/setup_harbor.sh``
builds locally from Debian's packages with ``debootstrap``.

Slow to start (a build and a container, tens of seconds on 2 cores), so the host sandbox stays the
default; this one is for tasks the host sandbox refuses.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import SandboxFailure
from atroposlib.interop.harbor.bwrap import CommandLimits, CommandResult
from atroposlib.interop.harbor.harbor_install import harbor_env, harbor_python, missing_podman
from atroposlib.interop.harbor.sandbox import Sandbox
from atroposlib.interop.harbor.task import HarborTask

REPLY_LIMIT = 64 * 2**20  # the longest reply line the bridge may send
STOP_TIMEOUT_S = 60.0


class HarborRuntimeSandbox(Sandbox):
    """One trial in Harbor's podman backend (see the module docstring)."""

    kind = "podman"

    def __init__(self, task: HarborTask, trial_dir: Path, limits: CommandLimits) -> None:
        super().__init__(task, trial_dir, limits)
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._lock = asyncio.Lock()

    @classmethod
    def missing(cls) -> Optional[str]:
        return missing_podman()

    @classmethod
    def refusal(cls, task: HarborTask) -> Optional[str]:
        if task.dockerfile is None and task.compose_file is None:
            return f"it runs on the prebuilt image {task.docker_image}, which cannot be pulled here"
        return None

    async def start(self) -> None:
        python = harbor_python()
        missing = missing_podman()
        if python is None or missing:
            raise SandboxFailure("start", missing or "Harbor is not installed")
        self.trial_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.trial_dir / "bridge.log", "ab")
        self._proc = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "atroposlib.interop.harbor.harbor_bridge",
            str(self.task.path),
            str(self.trial_dir / "harbor"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log,
            env=harbor_env(),
            limit=REPLY_LIMIT,
        )
        timeout = self.task.limits.build_timeout_s + 120.0
        try:
            reply = await asyncio.wait_for(self._read(), timeout=timeout)
        except asyncio.TimeoutError:
            raise SandboxFailure(
                "start", f"Harbor's podman trial did not start in {timeout:g} s"
            ) from None
        if "error" in reply:
            raise SandboxFailure("start", f"task {self.task.name}: {reply['message']}")

    async def _read(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        line = await self._proc.stdout.readline()
        if not line:
            tail = (self.trial_dir / "bridge.log").read_text(errors="replace").strip()[-300:]
            raise SandboxFailure(
                "runtime", f"Harbor's bridge ended (exit {await self._proc.wait()}): {tail}"
            )
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    async def _ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self._proc is None or self._proc.stdin is None:
            raise SandboxFailure("runtime", "the podman trial is not started")
        async with self._lock:  # one request at a time over the pipe
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            await self._proc.stdin.drain()
            try:
                return await asyncio.wait_for(self._read(), timeout=timeout_s)
            except asyncio.TimeoutError:
                raise SandboxFailure(
                    "runtime", f"Harbor's bridge did not answer {request['op']} in {timeout_s:g} s"
                ) from None

    async def run(self, command: str, limits: Optional[CommandLimits] = None) -> CommandResult:
        limits = limits or self.limits
        reply = await self._ask(
            {
                "op": "exec",
                "command": command,
                "timeout_s": limits.timeout_s,
                "max_output_bytes": limits.max_output_bytes,
            },
            limits.timeout_s + 120.0,
        )
        return CommandResult(
            exit_code=reply["exit_code"],
            output=reply["output"],
            timed_out=bool(reply["timed_out"]),
            truncated_bytes=int(reply["truncated_bytes"]),
        )

    async def verify(self) -> dict[str, float]:
        reply = await self._ask({"op": "verify"}, self.task.limits.verifier_timeout_s + 120.0)
        if "error" in reply:
            raise SandboxFailure(str(reply["error"]), str(reply["message"]))
        return {str(k): float(v) for k, v in reply["rewards"].items()}

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.returncode is None and proc.stdin is not None:
                try:
                    proc.stdin.write(b'{"op": "stop"}\n')
                    await proc.stdin.drain()
                    proc.stdin.close()
                    await asyncio.wait_for(proc.wait(), timeout=STOP_TIMEOUT_S)
                except (asyncio.TimeoutError, ConnectionError):
                    proc.kill()
                    await proc.wait()
            self._log.close()
        shutil.rmtree(self.trial_dir, ignore_errors=True)


__all__ = ["HarborRuntimeSandbox"]

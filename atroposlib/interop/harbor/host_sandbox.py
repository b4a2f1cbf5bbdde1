"""``HostSandbox``: a Harbor trial on this machine's own system, isolated by bubblewrap (``--harbor.sandbox host``).

What it isolates (each command is one ``bwrap`` run, ``bwrap.bwrap_argv``): no network (a network
namespace of its own with only a loopback; nothing on the host or any other namespace can be
reached), a read-only system (the host's ``/usr`` and ``/etc``, read-only), writes only into the
trial's own folders (one host folder per top-level directory the task uses: its ``WORKDIR`` and
``COPY`` targets such as ``/app``, plus ``/logs``, ``/tests``, ``/solution`` and ``/tmp``; they last
for the trial and are removed by ``stop``), a uid of its own (as root, every trial runs as a fresh
unprivileged host uid that owns its folders; inside it is uid 1000), no other process visible, and
per-command limits (time, output size, memory, processes, file size). A command's background
processes end with the command (its process namespace ends with it).

What it does not do: build an image. The task's Dockerfile is replayed as ``dockerfile`` reads it:
files copied in, ``RUN`` commands run at start, ``apt-get install`` checked against the host's Debian
packages. ``refusal`` says in one line why a task cannot run here (a package the host lacks, a pip
install, a multi-stage build, a compose file or a prebuilt image, a write into the host's system).

The verifier runs the same way after the agent: ``/tests`` and ``/logs/verifier`` are reset from the
host side (nothing the model left there survives), ``bash /tests/test.sh`` runs with the task's
verifier timeout and env, and the reward file is read from the host, refusing links that point out of
the trial. Standard library and atroposlib's leaf modules only (Harbor's Python imports it).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Optional

from atroposlib.errors import SandboxFailure
from atroposlib.interop.harbor.bwrap import (
    CommandLimits,
    CommandResult,
    bwrap_argv,
    missing_bwrap,
    run_limited,
)
from atroposlib.interop.harbor.dockerfile import Copy, ImagePlan, Run, read_dockerfile
from atroposlib.interop.harbor.rewards import read_rewards
from atroposlib.interop.harbor.sandbox import Sandbox
from atroposlib.interop.harbor.task import HarborTask

SYSTEM_DIRS = frozenset(
    {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "dev", "sys"}
)
TRIAL_DIRS = ("/logs", "/tests", "/solution", "/tmp")
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
HARNESS_OUTPUT_BYTES = 16 * 2**20  # what set-up and verifier commands may print (kept, not shown)
_UIDS = itertools.cycle(range(260_000, 320_000))  # envkit.sandbox uses 200000-259999
_UID_LOCK = threading.Lock()


def _fresh_uid() -> Optional[int]:
    """A new unprivileged host uid for a trial when we are root; None (run as ourselves) otherwise."""
    if os.geteuid() != 0:
        return None
    with _UID_LOCK:
        return next(_UIDS)


def _unreachable(folder: Path) -> Optional[Path]:
    """The first folder above ``folder`` that another uid cannot enter, or None."""
    for parent in [folder, *folder.parents]:
        if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def make_trial_dir(base: Optional[Path] = None, prefix: str = "trial-") -> Path:
    """A new, empty trial folder under ``base`` (default: the system's temp folder) that a trial's
    own uid can enter (mode 0711; ``tempfile.mkdtemp`` alone makes 0700)."""
    root = Path(base) if base is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    folder.chmod(0o711)
    return folder


def host_has_package(name: str) -> Optional[bool]:
    """Whether the Debian package ``name`` is installed here (None: this host cannot tell)."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and done.stdout.strip().endswith("installed")


def image_plan(task: HarborTask) -> ImagePlan:
    """The task's Dockerfile as the host sandbox replays it (a refusal when there is none)."""
    if task.dockerfile is not None:
        return read_dockerfile(task.dockerfile)
    if task.compose_file is not None:
        why = f"its environment is a compose file ({task.compose_file.name}), which the host sandbox cannot start"
    else:
        why = f"it runs on the prebuilt image {task.docker_image}, which the host sandbox cannot provide"
    return ImagePlan(refusal=why)


def _top(path: str) -> str:
    parts = PurePosixPath(path).parts
    return parts[1] if len(parts) > 1 else ""


def _plan_refusal(plan: ImagePlan) -> Optional[str]:
    if plan.refusal:
        return plan.refusal
    for step in plan.steps:
        if isinstance(step, Copy) and _top(step.target) in SYSTEM_DIRS | {""}:
            return f"its Dockerfile copies into {step.target}, inside the host's read-only system"
    lacking: list[str] = []
    unknown: list[str] = []
    for package in plan.packages:
        has = host_has_package(package)
        if has is None:
            unknown.append(package)
        elif not has:
            lacking.append(package)
    if unknown:
        return f"it installs {', '.join(unknown)} and this host cannot tell whether it has them (no dpkg-query)"
    if lacking:
        return (
            f"its image installs the Debian package(s) {', '.join(lacking)}, which this host lacks "
            "(install them here, or use --harbor.sandbox podman)"
        )
    return None


class HostSandbox(Sandbox):
    """One trial in bubblewrap on this machine (see the module docstring)."""

    kind = "host"

    def __init__(self, task: HarborTask, trial_dir: Path, limits: CommandLimits) -> None:
        super().__init__(task, trial_dir, limits)
        self.plan = image_plan(task)
        self.workdir = task.workdir or self.plan.workdir
        self.fs_root = self.trial_dir / "fs"
        tops = {_top(d) for d in TRIAL_DIRS} | {_top(self.workdir)}
        tops |= {_top(s.target) for s in self.plan.steps if isinstance(s, Copy)}
        self.mounts = {f"/{t}": self.fs_root / t for t in sorted(tops - {""} - SYSTEM_DIRS)}
        self.user = _fresh_uid()
        self.env = dict(self.plan.env)

    @classmethod
    def missing(cls) -> Optional[str]:
        return missing_bwrap()

    @classmethod
    def refusal(cls, task: HarborTask) -> Optional[str]:
        return _plan_refusal(image_plan(task))

    # --- paths ----------------------------------------------------------------------------------
    def host_path(self, sandbox_path: str) -> Path:
        """The host path of ``sandbox_path`` (inside one of the trial's folders, links resolved)."""
        path = PurePosixPath(os.path.normpath(PurePosixPath(self.workdir) / sandbox_path))
        if f"/{_top(str(path))}" not in self.mounts:
            raise SandboxFailure("runtime", f"{path} is outside the trial's folders")
        host = self.fs_root.joinpath(*path.parts[1:])
        if not host.resolve().is_relative_to(self.fs_root.resolve()):
            raise SandboxFailure("runtime", f"{path} leads out of the trial's folders")
        return host

    def _own(self, path: Path) -> None:
        """Give ``path`` (and what is below it) to the trial's uid."""
        if self.user is None:
            return
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.chown(name, self.user, self.user, follow_symlinks=False)

    def _reset(self, sandbox_dir: str) -> Path:
        """An empty host folder at ``sandbox_dir`` (what was there, links included, removed)."""
        host = self.fs_root.joinpath(*PurePosixPath(sandbox_dir).parts[1:])
        if host.is_symlink() or host.is_file():
            host.unlink()
        elif host.exists():
            shutil.rmtree(host)
        host.mkdir(parents=True)
        return host

    # --- the trial ------------------------------------------------------------------------------
    async def start(self) -> None:
        refusal = _plan_refusal(self.plan)
        if refusal:
            raise SandboxFailure("refused", f"task {self.task.name}: {refusal}")
        self.trial_dir.mkdir(parents=True, exist_ok=True)
        self.trial_dir.chmod(0o711)
        closed = _unreachable(self.trial_dir) if self.user is not None else None
        if closed is not None:
            raise SandboxFailure(
                "start",
                f"the trial's uid cannot enter {closed} (mode {closed.stat().st_mode & 0o777:o}): "
                "give a trials folder others may enter (make_trial_dir makes one)",
            )
        for host in self.mounts.values():
            host.mkdir(parents=True, exist_ok=True)
        for sub in (self.workdir, *LOG_DIRS):
            if f"/{_top(sub)}" in self.mounts:
                self.host_path(sub).mkdir(parents=True, exist_ok=True)
        for step in self.plan.steps:
            if isinstance(step, Copy):
                self._copy_in(step)
        self._own(self.fs_root)
        build = dataclasses.replace(
            self.limits,
            timeout_s=self.task.limits.build_timeout_s,
            max_output_bytes=HARNESS_OUTPUT_BYTES,
        )
        for step in self.plan.steps:
            if isinstance(step, Run):
                done = await self.exec(step.command, limits=build)
                if done.exit_code != 0:
                    how = "ran past its time" if done.timed_out else f"exited {done.exit_code}"
                    tail = done.output.strip()[-300:]
                    raise SandboxFailure(
                        "start", f"task {self.task.name}: RUN {step.command[:80]} {how}: {tail}"
                    )

    def _copy_in(self, step: Copy) -> None:
        context = self.task.environment_dir.resolve()
        sources: list[Path] = []
        for pattern in step.sources:
            matched = sorted(context.glob(pattern)) if any(c in pattern for c in "*?[") else []
            sources += matched or [context / pattern]
        many = len(sources) > 1 or step.target.endswith("/")
        target = self.host_path(step.target)
        for source in sources:
            source = source.resolve()
            if not source.is_relative_to(context) or not source.exists():
                raise SandboxFailure(
                    "start",
                    f"task {self.task.name}: COPY source {source} is not in its environment/",
                )
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            else:
                dest = target / source.name if many or target.is_dir() else target
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)

    async def exec(
        self,
        command: str,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        limits: Optional[CommandLimits] = None,
    ) -> CommandResult:
        """Run ``command`` in the sandbox (in ``cwd``, with ``env`` on top of the image's)."""
        limits = limits or self.limits
        argv = bwrap_argv(
            self.mounts, command, cwd or self.workdir, {**self.env, **(env or {})}, limits
        )
        done = await run_limited(argv, limits, self.user)
        if done.exit_code == 1 and done.output.startswith("bwrap: "):
            raise SandboxFailure("runtime", f"bubblewrap failed: {done.output.strip()[:300]}")
        return done

    async def run(self, command: str, limits: Optional[CommandLimits] = None) -> CommandResult:
        return await self.exec(command, limits=limits)

    async def upload(self, source: Path, target: str) -> None:
        """Copy the host file or folder ``source`` to ``target`` in the sandbox."""
        dest = self.host_path(target)
        if Path(source).is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
        self._own(dest if dest.is_dir() else dest.parent)

    async def download(self, source: str, target: Path) -> None:
        """Copy ``source`` (a file or folder in the sandbox) to the host path ``target``; links are
        copied as links, never followed."""
        src = self.host_path(source)
        target = Path(target)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        elif src.is_file() and not src.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
        else:
            raise SandboxFailure("runtime", f"{source} is not a file or folder of the trial")

    async def verify(self) -> dict[str, float]:
        tests = self._reset("/tests")
        shutil.copytree(self.task.tests_dir, tests, symlinks=True, dirs_exist_ok=True)
        verifier = self._reset("/logs/verifier")
        self._own(tests)
        self._own(verifier)
        timeout = self.task.limits.verifier_timeout_s
        limits = dataclasses.replace(
            self.limits, timeout_s=timeout, max_output_bytes=HARNESS_OUTPUT_BYTES
        )
        done = await self.exec(
            "bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1",
            env=self.task.verifier_env,
            limits=limits,
        )
        if done.timed_out:
            raise SandboxFailure("verifier", f"the verifier ran past its {timeout:g} s")
        try:
            return read_rewards(self.host_path("/logs/verifier"))
        except SandboxFailure as failure:
            if done.exit_code == 0:
                raise
            log = verifier / "test-stdout.txt"
            tail = (
                log.read_text(errors="replace").strip()[-200:]
                if log.is_file() and not log.is_symlink()
                else ""
            )
            raise SandboxFailure(
                "verifier", f"the verifier exited {done.exit_code} ({failure}): {tail}"
            ) from None

    async def stop(self) -> None:
        shutil.rmtree(self.trial_dir, ignore_errors=True)


__all__ = ["HostSandbox", "host_has_package", "image_plan", "make_trial_dir"]

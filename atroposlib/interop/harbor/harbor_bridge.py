"""One Harbor trial driven over a pipe, inside Harbor's own Python: what ``harbor_runtime`` talks to.

    HARBOR_PYTHON -m atroposlib.interop.harbor.harbor_bridge TASK_DIR TRIAL_DIR

Run with Harbor's Python 3.12 (the checkout on ``PYTHONPATH``, no torch), it builds and starts the
task's environment with Harbor's own podman backend (``PodmanEnvironment``: the task's Dockerfile
built by podman, the container run by podman-compose), then answers one JSON request a line on stdin
with one JSON reply a line on its original stdout (everything else it or Harbor prints goes to
stderr):

* start-up: ``{"ready": true}``, or ``{"error": KIND, "message": ...}`` and exit 1;
* ``{"op": "exec", "command": C, "timeout_s": T, "max_output_bytes": N}`` ->
  ``{"exit_code", "output", "timed_out", "truncated_bytes"}``: ``C`` runs in the task's working
  directory under ``timeout -s KILL T`` (coreutils' ``timeout`` kills the command's whole process
  group at ``T``), stdout then stderr (the TTY's ``\\r\\n`` read as ``\\n``), the first ``N`` bytes kept;
* ``{"op": "verify"}`` -> ``{"rewards": {...}}`` from Harbor's own ``Verifier`` (tests uploaded,
  ``test.sh`` run, the reward file parsed), or ``{"error": "verifier"|"no_reward", "message"}``;
* ``{"op": "stop"}`` (or the end of stdin) -> the container removed, ``{"stopped": true}``, exit 0.

The container has no network whatever the task says (Harbor's own no-network compose overlay,
``network_mode: none``; Harbor 0.25's ``no-network`` mode needs an egress sidecar image that cannot
be pulled here) and stops at once (``stop_signal: SIGKILL``: its ``sleep infinity`` would ignore
SIGTERM for 10 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

OVERLAY = "services:\n  main:\n    network_mode: none\n    stop_signal: SIGKILL\n"
"""The compose overlay every trial's main container gets (see the module docstring)."""
TIMED_OUT = 137  # coreutils timeout -s KILL: 128 + SIGKILL


def write_overlay(folder: Path) -> Path:
    """The compose overlay file in ``folder`` (also given to ``harbor trial start --extra-docker-compose``)."""
    path = folder / "atroposlib-podman-overlay.yaml"
    path.write_text(OVERLAY)
    return path


def _reply(out: IO[str], **fields: Any) -> None:
    out.write(json.dumps(fields) + "\n")
    out.flush()


def _environment(task: Any, trial_dir: Path) -> Any:
    from harbor.environments.podman import PodmanEnvironment  # type: ignore[import-not-found]
    from harbor.models.trial.paths import TrialPaths  # type: ignore[import-not-found]

    paths = TrialPaths(trial_dir=trial_dir)
    paths.mkdir()
    return PodmanEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name=task.short_name,
        session_id=f"{task.short_name}__{uuid.uuid4().hex[:8]}__env",
        trial_paths=paths,
        task_env_config=task.config.environment,
        extra_docker_compose=[write_overlay(trial_dir)],
    ), paths


async def _exec(environment: Any, request: dict[str, Any]) -> dict[str, Any]:
    limit = float(request["timeout_s"])
    keep = int(request["max_output_bytes"])
    command = f"timeout -s KILL {limit:g} bash -c {shlex.quote(str(request['command']))}"
    start = time.monotonic()
    result = await environment.exec(command, timeout_sec=int(limit) + 60)
    elapsed = time.monotonic() - start
    text = (result.stdout or "") + (result.stderr or "")
    data = text.replace("\r\n", "\n").encode("utf-8", errors="replace")  # compose exec's TTY
    timed_out = result.return_code == TIMED_OUT and elapsed >= limit
    return {
        "exit_code": None if timed_out else result.return_code,
        "output": data[:keep].decode("utf-8", errors="replace"),
        "timed_out": timed_out,
        "truncated_bytes": max(0, len(data) - keep),
    }


async def _verify(task: Any, paths: Any, environment: Any) -> dict[str, Any]:
    from harbor.verifier import verifier as harbor_verifier  # type: ignore[import-not-found]

    try:
        result = await harbor_verifier.Verifier(
            task=task, trial_paths=paths, environment=environment
        ).verify()
    except (
        harbor_verifier.RewardFileNotFoundError,
        harbor_verifier.RewardFileEmptyError,
        harbor_verifier.VerifierOutputParseError,
    ) as exc:
        return {"error": "no_reward", "message": str(exc).splitlines()[0]}
    except Exception as exc:  # noqa: BLE001 - the verifier's failure is the reply, not the bridge's
        return {"error": "verifier", "message": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    return {"rewards": {k: float(v) for k, v in (result.rewards or {}).items()}}


async def _serve(task_dir: Path, trial_dir: Path, out: IO[str]) -> int:
    from harbor.models.task.task import Task  # type: ignore[import-not-found]

    task = Task(task_dir)
    try:
        environment, paths = _environment(task, trial_dir)
        await environment.start(force_build=False)
    except Exception as exc:  # noqa: BLE001 - a start failure is the reply
        _reply(out, error="start", message=f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
        return 1
    _reply(out, ready=True)
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            request = json.loads(line)
            if request["op"] == "exec":
                _reply(out, **await _exec(environment, request))
            elif request["op"] == "verify":
                _reply(out, **await _verify(task, paths, environment))
            else:
                break
    finally:
        await environment.stop(delete=True)
    _reply(out, stopped=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: harbor_bridge TASK_DIR TRIAL_DIR", file=sys.stderr)
        return 2
    out = os.fdopen(os.dup(1), "w")  # the replies; Harbor's own prints go to stderr
    os.dup2(2, 1)
    return asyncio.run(_serve(Path(argv[0]), Path(argv[1]), out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

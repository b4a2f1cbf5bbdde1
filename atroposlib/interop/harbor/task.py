"""A Harbor task folder, read: its instruction, settings, environment definition, tests and solution.

A Harbor task is a folder with ``task.toml`` (agent, verifier and environment settings),
``instruction.md`` (the prompt), ``environment/Dockerfile`` (or ``environment/docker-compose.yaml``, or
a prebuilt ``[environment].docker_image``), ``tests/test.sh`` (copied to ``/tests`` after the agent
ran; it writes ``/logs/verifier/reward.txt`` or ``reward.json``) and, optionally,
``solution/solve.sh`` (what Harbor's ``oracle`` agent runs). ``read_task`` reads one; a folder that is
not a task is ``NotAHarborTask`` with one line naming the folder and the missing file.
``find_tasks`` takes one task or a folder of them (any depth: a folder holding ``task.toml`` is a task).

Per-episode limits: Harbor's own ``[agent].timeout_sec`` (the episode's wall time) and
``[verifier].timeout_sec``; the limits Harbor has no field for live under ``[metadata.limits]``
(Harbor keeps ``metadata`` as it is): ``max_turns``, ``command_timeout_sec`` and ``max_output_bytes``.
Each is None where the task does not set it, and the env's flags fill it.

Standard library and ``atroposlib.errors`` only: Harbor's own Python imports this module (the
host-sandbox backend, ``harbor_backend``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import NotAHarborTask

TASK_FILE = "task.toml"
INSTRUCTION_FILE = "instruction.md"
TEST_SCRIPT = Path("tests") / "test.sh"
SOLUTION_SCRIPT = Path("solution") / "solve.sh"
DOCKERFILE = Path("environment") / "Dockerfile"
COMPOSE_FILES = (
    Path("environment") / "docker-compose.yaml",
    Path("environment") / "docker-compose.yml",
)
VERIFIER_TIMEOUT_S = 600.0  # Harbor's default [verifier].timeout_sec
BUILD_TIMEOUT_S = 600.0  # Harbor's default [environment].build_timeout_sec


@dataclass(frozen=True)
class TaskLimits:
    """The limits a task sets (None: the env's flag decides)."""

    agent_timeout_s: Optional[float] = None
    verifier_timeout_s: float = VERIFIER_TIMEOUT_S
    build_timeout_s: float = BUILD_TIMEOUT_S
    max_turns: Optional[int] = None
    command_timeout_s: Optional[float] = None
    max_output_bytes: Optional[int] = None


@dataclass(frozen=True)
class HarborTask:
    """One task folder, read (see the module docstring)."""

    path: Path
    instruction: str
    limits: TaskLimits
    workdir: Optional[str] = None
    network_mode: str = "public"
    docker_image: Optional[str] = None
    dockerfile: Optional[Path] = None
    compose_file: Optional[Path] = None
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    multi_step: bool = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_script(self) -> Optional[Path]:
        script = self.path / SOLUTION_SCRIPT
        return script if script.is_file() else None


def _not_a_task(path: Path, why: str) -> NotAHarborTask:
    return NotAHarborTask(f"{path} is not a Harbor task: {why}")


def _table(data: Mapping[str, Any], name: str, path: Path) -> Mapping[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise _not_a_task(path, f"[{name}] in {TASK_FILE} is not a table")
    return value


def _number(table: Mapping[str, Any], key: str, where: str, path: Path) -> Optional[float]:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _not_a_task(path, f"{where}.{key} in {TASK_FILE} must be a positive number")
    return float(value)


def _count(table: Mapping[str, Any], key: str, path: Path) -> Optional[int]:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _not_a_task(path, f"metadata.limits.{key} in {TASK_FILE} must be a positive integer")
    return value


def _limits(config: Mapping[str, Any], path: Path) -> TaskLimits:
    agent, verifier = _table(config, "agent", path), _table(config, "verifier", path)
    environment = _table(config, "environment", path)
    limits = _table(_table(config, "metadata", path), "limits", path)
    return TaskLimits(
        agent_timeout_s=_number(agent, "timeout_sec", "agent", path),
        verifier_timeout_s=_number(verifier, "timeout_sec", "verifier", path) or VERIFIER_TIMEOUT_S,
        build_timeout_s=_number(environment, "build_timeout_sec", "environment", path)
        or BUILD_TIMEOUT_S,
        max_turns=_count(limits, "max_turns", path),
        command_timeout_s=_number(limits, "command_timeout_sec", "metadata.limits", path),
        max_output_bytes=_count(limits, "max_output_bytes", path),
    )


def _toml() -> Any:
    """The TOML reader: the standard library's (Python >= 3.11), else ``tomli``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise NotAHarborTask(
                f"reading {TASK_FILE} on Python 3.10 needs the tomli package: pip install tomli"
            ) from None
    return tomllib


def _read_config(path: Path) -> dict[str, Any]:
    toml_path = path / TASK_FILE
    if not toml_path.is_file():
        raise _not_a_task(path, f"it has no {TASK_FILE}")
    toml = _toml()
    try:
        config = toml.loads(toml_path.read_text(encoding="utf-8"))
    except (toml.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _not_a_task(path, f"{TASK_FILE} is not valid TOML ({exc})") from None
    return dict(config)


def _environment_definition(
    path: Path, docker_image: Optional[str]
) -> tuple[Optional[Path], Optional[Path]]:
    """(Dockerfile, compose file) of the task; one of them, or a prebuilt image, must be there."""
    dockerfile = path / DOCKERFILE
    compose = next((path / c for c in COMPOSE_FILES if (path / c).is_file()), None)
    if not dockerfile.is_file() and compose is None and not docker_image:
        raise _not_a_task(
            path,
            f"it has no {DOCKERFILE} (nor {COMPOSE_FILES[0]}, nor [environment].docker_image "
            f"in {TASK_FILE})",
        )
    return (dockerfile if dockerfile.is_file() else None), compose


def read_task(path: str | Path) -> HarborTask:
    """The task in ``path``; ``NotAHarborTask`` (one line naming the missing file) otherwise."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise NotAHarborTask(f"{path} is not a Harbor task: no such folder")
    config = _read_config(path)
    instruction_path = path / INSTRUCTION_FILE
    if not instruction_path.is_file():
        raise _not_a_task(path, f"it has no {INSTRUCTION_FILE}")
    instruction = instruction_path.read_text(encoding="utf-8", errors="replace").strip()
    if not instruction:
        raise _not_a_task(path, f"its {INSTRUCTION_FILE} is empty")
    if not (path / TEST_SCRIPT).is_file():
        raise _not_a_task(path, f"it has no {TEST_SCRIPT}")
    environment = _table(config, "environment", path)
    docker_image = environment.get("docker_image") or None
    dockerfile, compose = _environment_definition(path, docker_image)
    verifier_env = _table(_table(config, "verifier", path), "env", path)
    return HarborTask(
        path=path,
        instruction=instruction,
        limits=_limits(config, path),
        workdir=environment.get("workdir") or None,
        network_mode=str(environment.get("network_mode", "public")),
        docker_image=docker_image,
        dockerfile=dockerfile,
        compose_file=compose,
        verifier_env={str(k): str(v) for k, v in verifier_env.items()},
        metadata=dict(_table(config, "metadata", path)),
        multi_step=bool(config.get("steps")) or (path / "steps").is_dir(),
    )


def find_tasks(path: str | Path) -> list[HarborTask]:
    """The task in ``path``, or every task below it (a folder with ``task.toml`` is a task and is not
    searched further), sorted by their path; ``NotAHarborTask`` when there is none, or when a folder
    with a ``task.toml`` is not a whole task."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise NotAHarborTask(f"{root} is not a Harbor task nor a folder of them: no such folder")
    if (root / TASK_FILE).is_file():
        return [read_task(root)]
    found: list[HarborTask] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        for child in sorted(folder.iterdir()):
            if not child.is_dir() or child.name.startswith("."):
                continue
            if (child / TASK_FILE).is_file():
                found.append(read_task(child))
            else:
                pending.append(child)
    if not found:
        raise NotAHarborTask(
            f"{root} is not a Harbor task nor a folder of them: no {TASK_FILE} in it or below it"
        )
    return sorted(found, key=lambda t: str(t.path))


__all__ = ["HarborTask", "TaskLimits", "find_tasks", "read_task"]

"""What a task's ``environment/Dockerfile`` asks of the host sandbox: its plan, or why it cannot be met.

The host sandbox (``host_sandbox``) runs a task on the host's own system, read-only, so it cannot
build an image. It can still honour what most small tasks' Dockerfiles do, and this module reads a
Dockerfile into that ``ImagePlan``:

* ``FROM`` (one; the base is not fetched: the host's ``/usr`` stands in for it), ``WORKDIR``,
  ``ENV`` and ``ARG`` defaults (``${NAME}`` in later lines is replaced);
* ``COPY``/``ADD`` of files from the build context (``environment/``) into the trial's folders;
* ``RUN``: ``apt-get``/``apt`` housekeeping (``update``, ``clean``, removing ``/var/lib/apt/lists``)
  is dropped; ``apt-get install PKG...`` becomes a check that the host has each Debian package;
  every other command is run in the sandbox when it starts, network off, as the sandbox's user;
* ``USER``, ``CMD``, ``ENTRYPOINT``, ``EXPOSE``, ``LABEL``, ``HEALTHCHECK``, ``STOPSIGNAL``,
  ``VOLUME``, ``SHELL`` and ``MAINTAINER`` change nothing a command sees here and are ignored.

What cannot be honoured is a ``refusal`` (one line): several ``FROM`` (multi-stage builds), ``COPY
--from``, ``ADD`` of a URL, ``pip``/``conda``/``npm`` installs (packages the host sandbox cannot add),
``ONBUILD``, or an instruction it does not know. Standard library only (Harbor's Python imports it).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

IGNORED = frozenset(
    {
        "USER",
        "CMD",
        "ENTRYPOINT",
        "EXPOSE",
        "LABEL",
        "HEALTHCHECK",
        "STOPSIGNAL",
        "VOLUME",
        "SHELL",
        "MAINTAINER",
    }
)
_INSTALLERS = re.compile(r"^(pip3?|python3? -m pip|conda|mamba|npm|yarn|pnpm|uv|cargo|gem) ")
_APT_HOUSEKEEPING = re.compile(
    r"^(apt(-get)? (update|clean|autoclean|autoremove)\b|rm -rf /var/lib/apt/lists)"
)
_APT_INSTALL = re.compile(r"^(DEBIAN_FRONTEND=\S+ )?apt(-get)? install\b")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Copy:
    """Files from the build context (``sources``, relative to it) to ``target`` in the sandbox."""

    sources: tuple[str, ...]
    target: str


@dataclass(frozen=True)
class Run:
    """A command the sandbox runs once, when it starts."""

    command: str


@dataclass
class ImagePlan:
    """The Dockerfile as the host sandbox replays it (see the module docstring)."""

    base: Optional[str] = None
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    steps: list[Copy | Run] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    refusal: Optional[str] = None


def _logical_lines(text: str) -> list[str]:
    """The Dockerfile's instructions: comments dropped, ``\\`` continuations joined."""
    lines, current = [], ""
    for raw in text.split("\n"):
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current.strip():
            lines.append(current.strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _expand(text: str, values: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def _arguments(rest: str) -> list[str]:
    """An instruction's arguments, in its JSON (exec) form or its shell form."""
    if rest.startswith("["):
        try:
            parsed = json.loads(rest)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(p, str) for p in parsed):
            return parsed
    return shlex.split(rest)


def _key_values(rest: str) -> dict[str, str]:
    """``ENV``/``ARG`` settings: ``K=V K2="v 2"`` or the old ``K value`` form."""
    parts = shlex.split(rest)
    if parts and "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    settings: dict[str, str] = {}
    for part in parts:
        key, _, value = part.partition("=")
        settings[key] = value
    return settings


def _segments(command: str) -> list[str]:
    return [s.strip() for s in re.split(r"&&|;", command) if s.strip()]


def _plan_run(command: str, plan: ImagePlan) -> Optional[str]:
    """Add a ``RUN`` to ``plan``; its refusal, or None."""
    kept = []
    for segment in _segments(command):
        if _INSTALLERS.match(segment):
            return f"its Dockerfile installs packages ({segment.split()[0]}), which the host sandbox cannot"
        if _APT_HOUSEKEEPING.match(segment):
            continue
        if _APT_INSTALL.match(segment):
            words = shlex.split(segment)
            start = words.index("install") + 1
            plan.packages += [w.split("=")[0] for w in words[start:] if not w.startswith("-")]
            continue
        kept.append(segment)
    if kept:
        plan.steps.append(Run(" && ".join(kept)))
    return None


def _plan_copy(word: str, rest: str, plan: ImagePlan) -> Optional[str]:
    args = _arguments(rest)
    flags = [a for a in args if a.startswith("--")]
    paths = [a for a in args if not a.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        return f"its Dockerfile copies from another stage ({word} --from), a multi-stage build"
    if len(paths) < 2:
        return f"its Dockerfile has a {word} without a source and a target"
    if any(re.match(r"^[a-z]+://", p) for p in paths[:-1]):
        return f"its Dockerfile fetches {paths[0]} ({word} of a URL), which needs the network"
    target = paths[-1]
    if not target.startswith("/"):
        keep_slash = target.endswith("/")
        target = str(PurePosixPath(plan.workdir) / target) + ("/" if keep_slash else "")
    plan.steps.append(Copy(tuple(paths[:-1]), target))
    return None


def _plan_line(line: str, plan: ImagePlan, values: dict[str, str]) -> Optional[str]:
    """Add one instruction to ``plan``; its refusal, or None."""
    word, _, rest = line.partition(" ")
    word, rest = word.upper(), _expand(rest.strip(), values)
    if word == "FROM":
        if plan.base is not None:
            return "its Dockerfile is a multi-stage build (several FROM)"
        plan.base = rest.split()[0] if rest else ""
    elif word == "WORKDIR":
        plan.workdir = str(PurePosixPath(plan.workdir) / rest)
    elif word in ("ENV", "ARG"):
        settings = _key_values(rest)
        values.update(settings)
        if word == "ENV":
            plan.env.update(settings)
    elif word in ("COPY", "ADD"):
        return _plan_copy(word, rest, plan)
    elif word == "RUN":
        args = _arguments(rest)
        return _plan_run(rest if not rest.startswith("[") else shlex.join(args), plan)
    elif word not in IGNORED:
        return f"its Dockerfile uses {word}, which the host sandbox does not replay"
    return None


def read_dockerfile(path: Path) -> ImagePlan:
    """The plan of the Dockerfile at ``path`` (its ``refusal`` set when it cannot be replayed)."""
    plan = ImagePlan()
    values: dict[str, str] = {}
    for line in _logical_lines(path.read_text(encoding="utf-8", errors="replace")):
        refusal = _plan_line(line, plan, values)
        if refusal is not None:
            plan.refusal = refusal
            return plan
    if plan.base is None:
        plan.refusal = "its Dockerfile has no FROM"
    return plan


__all__ = ["Copy", "ImagePlan", "Run", "read_dockerfile"]

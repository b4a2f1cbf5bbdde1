"""The agent frameworks the conformance suite and the agent harness know, and where each one's own
Python is: ``scripts/setup_agents.sh`` installs each into a cached venv
(``~/.cache/atroposlib/agents/<name>-<version>``, or under ``ATROPOS_AGENTS_DIR``), and
``ATROPOS_AGENT_PYTHON_<NAME>`` points at a user's own. Keep ``FRAMEWORKS`` equal to the script's
table (``tests/interop/agents/test_frameworks_table.py`` checks)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

READY = ".atroposlib-agent-ok"


@dataclass(frozen=True)
class Framework:
    name: str
    version: str
    specs: tuple[str, ...]  # what pip installs

    @property
    def python_variable(self) -> str:
        """The environment variable naming a user's own Python for it."""
        return "ATROPOS_AGENT_PYTHON_" + self.name.upper().replace("-", "_")


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework("openai", "3.57.0", ("openai==3.57.0",)),
        Framework("openai-agents", "0.24.0", ("openai-agents==0.24.0",)),
        Framework("smolagents", "1.26.0", ("smolagents[openai]==1.26.0",)),
        Framework("mini-swe-agent", "2.4.6", ("mini-swe-agent==2.4.6", "litellm==1.110.2")),
        Framework("langchain-openai", "1.7.4", ("langchain-openai==1.7.4", "langgraph==1.2.22")),
        Framework("hermes-agent", "0.19.0", ("hermes-agent==0.19.0",)),
    )
}


def agents_dir() -> Path:
    """Where ``scripts/setup_agents.sh`` puts the frameworks' venvs."""
    return Path(os.environ.get("ATROPOS_AGENTS_DIR") or Path.home() / ".cache/atroposlib/agents")


def venv_of(name: str) -> Path:
    f = FRAMEWORKS[name]
    return agents_dir() / f"{f.name}-{f.version}"


def framework_python(name: str) -> Optional[str]:
    """The Python that has framework ``name``: its variable, else the set-up's venv, else None."""
    f = FRAMEWORKS[name]
    own = os.environ.get(f.python_variable)
    if own:
        return own
    venv = venv_of(name)
    return str(venv / "bin" / "python") if (venv / READY).exists() else None


def missing_reason(name: str) -> Optional[str]:
    """Why framework ``name`` has no Python here (the set-up's recorded failure), else None."""
    if framework_python(name) is not None:
        return None
    failed = venv_of(name) / "install-failed.txt"
    if failed.is_file():
        lines = failed.read_text().strip().splitlines() or ["(no reason recorded)"]
        return f"{name} could not be installed: {lines[-1]}"
    return (
        f"no {name}: run scripts/setup_agents.sh {name} (scripts/test.sh does) or set "
        f"{FRAMEWORKS[name].python_variable}"
    )


__all__ = ["FRAMEWORKS", "Framework", "agents_dir", "framework_python", "missing_reason", "venv_of"]

"""README's console-scripts table says which extra each command needs, and says it truthfully: every
console script is in it, every extra it names exists, and a command marked "core" starts (``--help``)
in a Python where torch cannot be imported."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPTS: dict[str, str] = PYPROJECT["project"]["scripts"]
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])


def _table() -> dict[str, str]:
    """command name -> its install cell, from the README's console-scripts table."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Console scripts") : text.index("## Layout")]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 3 or cells[0] in ("command", "---"):
            continue
        for name in re.findall(r"`([a-z][a-z0-9-]+)", cells[0]):
            rows.setdefault(name, cells[2])
    return rows


def test_every_console_script_says_what_to_install():
    rows = _table()
    missing = sorted(set(SCRIPTS) - set(rows))
    assert not missing, f"console scripts not in README's table: {missing}"
    for name in SCRIPTS:
        cell = rows[name]
        named = set(re.findall(r"`([a-z0-9,]+)`", cell))
        extras = {e for group in named for e in group.split(",")} & (EXTRAS | {"openenv"})
        assert cell.startswith("core") or extras, (name, cell)
        unknown = {e for group in named for e in group.split(",")} - EXTRAS
        assert not unknown or cell.startswith("core") or "pip install" in cell, (name, unknown)


CORE = sorted(
    name for name, cell in _table().items() if name in SCRIPTS and cell.startswith("core")
)


def _modules_used_by(module: str) -> list[str]:
    """``module`` and the package modules it imports anywhere in it (its lazy imports included)."""
    path = ROOT / (module.replace(".", "/") + ".py")
    found = [module]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(("atroposlib", "example_trainer")):
                found.append(node.module)
    return sorted(set(found))


def _load_without_torch(module: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Import ``module`` and every package module it imports (lazily too) where torch fails."""
    (tmp_path / "torch").mkdir(exist_ok=True)
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('torch is not installed')\n")
    code = f"import importlib\nfor m in {_modules_used_by(module)!r}:\n    importlib.import_module(m)\n"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )


@pytest.mark.parametrize("name", CORE)
def test_a_core_command_loads_without_torch(name, tmp_path):
    """A command marked core loads, with all it imports, in a Python without torch."""
    r = _load_without_torch(SCRIPTS[name].split(":")[0], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_torch_check_catches_a_command_that_needs_torch(tmp_path):
    r = _load_without_torch(SCRIPTS["atropos-serve-model"].split(":")[0], tmp_path)
    assert r.returncode != 0 and "torch is not installed" in r.stderr, r.stderr[-2000:]

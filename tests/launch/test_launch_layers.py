"""``atroposlib.launch`` sits on top: it never imports the env contract, the trainer or the CLIs, and
only the CLIs and the demo (``demo/``, above it) import it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_launch_imports_nothing_above_it():
    bad = [
        f"{f.name}: {m}"
        for f in sorted((ROOT / "atroposlib" / "launch").glob("*.py"))
        for m in _imports(f)
        if m.startswith(("atroposlib.envs", "atroposlib.cli", "example_trainer", "environments"))
    ]
    assert not bad, bad


def test_only_the_clis_and_the_demo_import_launch():
    users = [
        str(f.relative_to(ROOT))
        for top in ("atroposlib", "example_trainer")
        for f in (ROOT / top).rglob("*.py")
        if "launch" not in f.parts[-2:-1]
        and f.parent.name != "cli"
        and any(m.startswith("atroposlib.launch") for m in _imports(f))
    ]
    assert not users, users

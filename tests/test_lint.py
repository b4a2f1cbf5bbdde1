"""Lint as part of the suite: the tree is ruff-formatted and passes ruff's lint rules (both run only
where ruff is installed: the `dev` extra, which the README's set-up installs), and one rule of our own
that ruff has not: JSON lines are not split with ``str.splitlines`` or httpx's ``iter_lines``.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [found]


@pytest.mark.parametrize(
    "args", [["format", "--check", "."], ["check", "."]], ids=["format", "lint"]
)
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run(_ruff() + args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"ruff {' '.join(args)} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
    )


LINE_SPLITTERS = {"splitlines", "iter_lines", "aiter_lines"}


def _splits_text_into_json(node: ast.comprehension | ast.For, body: list[ast.AST]) -> bool:
    """A loop over ``<str>.splitlines()`` / ``iter_lines()`` whose body calls ``json.loads``.
    ``bytes.splitlines`` (over ``read_bytes()``) splits at ``\\n``/``\\r`` only, which JSON escapes."""
    it = node.iter
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and it.func.attr in LINE_SPLITTERS
    ):
        return False
    source = it.func.value
    if (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Attribute)
        and source.func.attr == "read_bytes"
    ):
        return False
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "loads"
        for part in body
        for n in ast.walk(part)
    )


def test_json_lines_are_split_at_newline_only() -> None:
    """``str.splitlines`` and httpx's ``iter_lines`` also split at U+2028, U+0085 and other
    separators, which JSON writers (ours, orjson, vLLM) leave raw inside strings, and a sampled token
    can be one: a record would be cut in two. Read JSONL with ``split("\\n")`` (tests: ``read_jsonl``)
    and SSE with ``tests.sse.sse_lines``."""
    found = []
    for folder in (
        "atroposlib",
        "example_trainer",
        "demo",
        "environments",
        "bench",
        "scripts",
        "tests",
    ):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                    elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
                    for gen in node.generators:
                        if _splits_text_into_json(gen, [*elts, *gen.ifs]):
                            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif isinstance(node, ast.For) and _splits_text_into_json(node, node.body):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "JSON split with splitlines/iter_lines at: " + ", ".join(found)

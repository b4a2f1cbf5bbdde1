"""Type checking as part of the suite: mypy over atroposlib and example_trainer holds to the baseline.

scripts/typecheck.py runs mypy (configured in pyproject.toml) and fails on any error the baseline
(tests/typecheck-baseline.txt) does not cover, and on any error at all in a strict module. The checks
run only where mypy is installed (the `dev` extra, which the README's set-up installs).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "typecheck.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tc = _load()


def _needs_mypy() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_typecheck_holds_to_the_baseline() -> None:
    _needs_mypy()
    proc = _run()
    assert proc.returncode == 0, f"type check failed:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}"


def test_strict_modules_are_strict_and_have_no_baseline_entry() -> None:
    _needs_mypy()
    is_strict = tc.strict_checker()
    for module in (
        "atroposlib.type_definitions",
        "atroposlib.errors",
        "atroposlib.history_types",
        "atroposlib.api.client",
        "atroposlib.api.wire",
        "atroposlib.api.store.sqlite",
    ):
        assert is_strict(module), module
    assert not is_strict("example_trainer.grpo")
    for key in tc.read_baseline():
        assert not is_strict(tc.module_of(key.path)), f"baseline entry in a strict module: {key}"


def test_update_refuses_to_grow_the_baseline(tmp_path: Path) -> None:
    _needs_mypy()
    full = tc.read_baseline()
    if not full:
        pytest.skip("the baseline is empty: nothing can be left out of it")
    dropped = sorted(full)[0]
    smaller = Counter(full)
    smaller[dropped] -= 1
    path = tmp_path / "baseline.txt"
    path.write_text(tc.format_baseline(smaller), encoding="utf-8")
    before = path.read_text(encoding="utf-8")

    proc = _run("--baseline", str(path))  # a check names the error the baseline lacks
    assert proc.returncode == 1 and f"NEW     {dropped.path}:" in proc.stdout, proc.stdout
    proc = _run("--update-baseline", "--baseline", str(path))
    assert proc.returncode == 1 and "would grow" in proc.stdout, proc.stdout
    assert path.read_text(encoding="utf-8") == before
    proc = _run("--update-baseline", "--allow-growth", "--baseline", str(path))
    assert proc.returncode == 0, proc.stdout
    assert tc.read_baseline(path) == full


# --- the comparison itself, on made-up mypy output ---------------------------------------------

OUTPUT = """\
pkg/a.py:10: error: Item "None" of "X | None" has no attribute "y"  [union-attr]
pkg/a.py:30: error: Item "None" of "X | None" has no attribute "y"  [union-attr]
pkg/a.py:31: note: See https://mypy.readthedocs.io
pkg/b.py:5:7: error: Name "f" already defined on line 2  [no-redef]
pkg/strict/__init__.py:1: error: Function is missing a type annotation  [no-untyped-def]
Found 4 errors in 3 files (checked 9 source files)
"""


def _is_strict(module: str) -> bool:
    return module.startswith("pkg.strict")


def test_parse_keys_survive_line_shifts() -> None:
    errors, odd = tc.parse_errors(OUTPUT)
    assert not odd
    assert [e.line for e in errors] == [10, 30, 5, 1]
    shifted, _ = tc.parse_errors(
        OUTPUT.replace(":10:", ":14:").replace("line 2", "line 9").replace(":5:7:", ":8:1:")
    )
    assert [e.key for e in shifted] == [e.key for e in errors]
    assert errors[2].key == tc.Key("pkg/b.py", "no-redef", 'Name "f" already defined on line N')
    assert tc.module_of("pkg/strict/__init__.py") == "pkg.strict"


def test_compare_names_new_strict_and_fixed_errors() -> None:
    errors, _ = tc.parse_errors(OUTPUT)
    union, redef = errors[0].key, errors[2].key
    gone = tc.Key("pkg/c.py", "arg-type", "fixed since")

    result = tc.compare(errors, Counter({union: 2, redef: 1, gone: 3}), _is_strict)
    assert not result.new and [e.line for e in result.strict] == [1] and not result.ok
    assert result.fixed == {gone: 3}

    # one more of a counted kind: both occurrences are named (which one is new cannot be told)
    result = tc.compare(errors, Counter({union: 1, redef: 1}), _is_strict)
    assert sorted(e.line for e in result.new) == [10, 30]

    # a strict module's error is never covered, even when the baseline lists it
    strict_key = errors[3].key
    result = tc.compare(errors, Counter({union: 2, redef: 1, strict_key: 1}), _is_strict)
    assert len(result.strict) == 1 and result.fixed == {strict_key: 1}


def test_baseline_file_round_trips(tmp_path: Path) -> None:
    errors, _ = tc.parse_errors(OUTPUT)
    counts = Counter(e.key for e in errors)
    path = tmp_path / "b.txt"
    path.write_text(tc.format_baseline(counts), encoding="utf-8")
    assert tc.read_baseline(path) == counts
    path.write_text("not a baseline line\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="malformed"):
        tc.read_baseline(path)

"""Import direction between the packages, and which modules may pull in torch at import time.

The API must not depend on the env runtime, the inference engine or the trainer; the inference engine
must not depend on the env runtime, the API or the trainer; the inference clients must not depend on
the envs, the runtime, the API or the trainer; the env author's toolkit (``atroposlib/envkit``) sits on the
env contract and below interop, the launcher and the tools, and is never imported by its old top-level
name ``envkit``; the runtime (``atroposlib/runtime``) and the group
builder (``atroposlib/groups.py``) import nothing from ``atroposlib.envs``, the env contract that sits
on top of them (all checked on every ``import`` and ``from ... import`` statement, lazy and
``TYPE_CHECKING`` ones included); nothing but ``atroposlib/interop`` itself imports the interop package. No runtime module imports the test doubles (``atroposlib.testing``) and ``environments/`` never imports
the trainer. The demo (``demo/``) sits above the trainer: ``example_trainer`` imports neither ``demo``
nor the toolkit, the launcher or the report (``atroposlib.envkit``, ``.launch``, ``.report``), but for
its one re-export of the demo's command line (``example_trainer/demo.py``); neither ``atroposlib`` nor
``environments/`` imports ``demo``. The tools and the env runtime load without torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "atroposlib"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("api", ("atroposlib.envs", "atroposlib.inference", "example_trainer")),
        ("inference", ("atroposlib.envs", "atroposlib.api", "example_trainer")),
        (
            "inference_clients",
            ("atroposlib.envs", "atroposlib.runtime", "atroposlib.api", "example_trainer"),
        ),
        (
            "envkit",
            (
                "atroposlib.interop",
                "atroposlib.launch",
                "atroposlib.viewer",
                "atroposlib.cli",
                "atroposlib.testing",
                "example_trainer",
                "envkit",
            ),
        ),
    ],
)
def test_package_does_not_import_upper_layers(package, forbidden):
    files = sorted((PKG / package).rglob("*.py"))
    assert files, f"no modules found under atroposlib/{package}"
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        for m in sorted(_imported_modules(f))
        if m.startswith(forbidden)
    ]
    assert not bad, bad


def _names_the_env_contract(module: str) -> bool:
    return module == "atroposlib.envs" or module.startswith("atroposlib.envs.")


@pytest.mark.parametrize("part", ["runtime", "groups.py"])
def test_the_runtime_imports_nothing_from_the_env_contract(part):
    """``atroposlib/runtime`` (and ``groups.py`` below it) use an env only through the
    ``EnvRuntime`` protocol; ``atroposlib.envs`` imports them, never the other way."""
    target = PKG / part
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    assert len(files) >= 1 and target.exists()
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        for m in sorted(_imported_modules(f))
        if _names_the_env_contract(m)
    ]
    assert not bad, bad


def test_the_env_contract_rule_is_not_vacuous():
    assert _names_the_env_contract("atroposlib.envs.base")
    assert _names_the_env_contract("atroposlib.envs")
    assert _names_the_env_contract("atroposlib.envs.server_handling.server_manager")
    assert not _names_the_env_contract("atroposlib.inference_clients.server_manager")


# The only modules outside ``atroposlib/testing`` allowed to name the test doubles: Atropos's paths
# of ``launch_api_for_testing`` and ``ServerHarness``, thin re-exports.
TEST_DOUBLE_ALIASES = {
    "atroposlib/tests/api_test_utils.py",
    "atroposlib/envs/server_handling/server_harness.py",
}


def test_no_production_module_imports_the_test_doubles():
    files = [
        f
        for f in sorted(PKG.rglob("*.py"))
        if not f.is_relative_to(PKG / "testing")
        and str(f.relative_to(PKG.parent)) not in TEST_DOUBLE_ALIASES
    ]
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        for m in sorted(_imported_modules(f))
        if m == "atroposlib.testing" or m.startswith("atroposlib.testing.")
    ]
    assert not bad, bad


def test_the_deleted_aliases_stay_deleted():
    """Test doubles have one home, and the tools' old ``frontend`` paths are gone: only Atropos's
    ``frontend/jsonl2html.py`` and ``tests/api_test_utils.py`` remain, as plain modules."""
    gone = ["envs/testing.py"] + [
        f"frontend/{m}.py"
        for m in ("datagen", "datagen_cli", "render", "report", "samples", "sources", "viewer")
    ]
    assert not [g for g in gone if (PKG / g).exists()]
    bad = [
        str(f.relative_to(PKG.parent))
        for f in sorted(PKG.rglob("*.py"))
        if "sys.modules[__name__]" in f.read_text()
    ]
    assert not bad, bad


def test_environments_never_import_the_trainer():
    files = sorted((PKG.parent / "environments").rglob("*.py"))
    assert files
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        for m in sorted(_imported_modules(f))
        if m == "example_trainer" or m.startswith("example_trainer.")
    ]
    assert not bad, bad


def _names_the_demo(module: str) -> bool:
    return module == "demo" or module.startswith("demo.")


# ``python -m example_trainer.demo`` and the demo's old names: a thin re-export of ``demo.cli``
TRAINER_DEMO_SHIM = "example_trainer/demo.py"
ABOVE_THE_TRAINER = ("atroposlib.envkit", "atroposlib.launch", "atroposlib.report")


def test_the_trainer_sits_below_the_demo():
    files = sorted((PKG.parent / "example_trainer").rglob("*.py"))
    assert len(files) > 20 and PKG.parent / TRAINER_DEMO_SHIM in files
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        if str(f.relative_to(PKG.parent)) != TRAINER_DEMO_SHIM
        for m in sorted(_imported_modules(f))
        if _names_the_demo(m) or m.startswith(ABOVE_THE_TRAINER)
    ]
    assert not bad, bad


def test_the_trainer_demo_shim_only_re_exports_the_demo():
    shim = PKG.parent / TRAINER_DEMO_SHIM
    assert {m for m in _imported_modules(shim) if m != "sys"} and all(
        _names_the_demo(m) for m in _imported_modules(shim) if m != "sys"
    )
    assert len(shim.read_text().splitlines()) < 40  # a re-export, not a second home of the demo


@pytest.mark.parametrize("folder", ["atroposlib", "environments"])
def test_nothing_below_the_demo_imports_it(folder):
    files = sorted((PKG.parent / folder).rglob("*.py"))
    assert files
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in files
        for m in sorted(_imported_modules(f))
        if _names_the_demo(m)
    ]
    assert not bad, bad


def test_the_demo_rule_is_not_vacuous():
    assert _names_the_demo("demo") and _names_the_demo("demo.presets.tiny_arithmetic")
    assert not _names_the_demo("demonstrations") and not _names_the_demo("atroposlib.demo")
    assert any(_names_the_demo(m) for m in _imported_modules(PKG.parent / "bench" / "gpu_check.py"))


def test_forbidden_import_is_detected(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from atroposlib.envs.base import BaseEnv\n    import example_trainer.grpo\n"
    )
    assert {"atroposlib.envs.base", "example_trainer.grpo"} <= _imported_modules(probe)


TOOL_MODULES = [
    "atroposlib.envs.base",
    "atroposlib.runtime.runner",
    "atroposlib.runtime.cli",
    "atroposlib.report.html",
    "atroposlib.viewer.app",
    "atroposlib.datagen.export",
    "atroposlib.cli.view_run",
    "atroposlib.cli.sft",
    "atroposlib.cli.dpo",
    "atroposlib.cli.jsonl2html",
    "atroposlib.utils.tokenize_for_trainer",
    "atroposlib.interop.openenv.env",
    "atroposlib.envkit.rollouts",
    "atroposlib.envkit.evaluation",
    "atroposlib.envkit.tool_calls",
    "atroposlib.envkit.servers",
    "atroposlib.envkit.data_sources",
]


def test_env_runtime_and_tools_import_without_torch():
    script = (
        "import importlib, sys\n"
        f"for m in {TOOL_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        "    assert 'torch' not in sys.modules, m\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_nothing_below_the_interop_package_imports_it():
    """``atroposlib/interop`` sits on top of the env contract: no other atroposlib module imports it."""
    bad = [
        f"{f.relative_to(PKG.parent)}: {m}"
        for f in sorted(PKG.rglob("*.py"))
        if "interop" not in f.relative_to(PKG).parts
        for m in sorted(_imported_modules(f))
        if m.startswith("atroposlib.interop")
    ]
    assert not bad, bad

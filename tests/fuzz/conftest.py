"""Fixtures of the schema-fuzzing tier: the real ``schemathesis`` in its own environment, and a tiny
model for the engine.

schemathesis (and hypothesis, jsonschema...) lives in its own environment, made once by
``scripts/setup_schemathesis.sh`` (``scripts/test.sh`` runs it; called here when it is missing) and
reused; ``ATROPOS_SCHEMATHESIS_PYTHON`` points at a user's own. Where there is none, the tier skips
with the reason the set-up recorded.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Optional

import pytest

SCHEMATHESIS_VERSION = "4.32.5"  # keep equal to VERSION in scripts/setup_schemathesis.sh
REPO = Path(__file__).resolve().parents[2]


def schemathesis_venv() -> Path:
    env = os.environ.get("ATROPOS_SCHEMATHESIS_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"schemathesis-{SCHEMATHESIS_VERSION}"


def find_schemathesis_python() -> Optional[str]:
    env = os.environ.get("ATROPOS_SCHEMATHESIS_PYTHON")
    if env:
        return env
    venv = schemathesis_venv()
    ok = venv / ".atroposlib-schemathesis-ok"
    return str(venv / "bin" / "python") if ok.exists() else None


@pytest.fixture(scope="session")
def schemathesis_python() -> str:
    """The Python that has schemathesis; set up once (cached under ~/.cache/atroposlib) or skip."""
    py = find_schemathesis_python()
    failed = schemathesis_venv() / "install-failed.txt"
    if py is None and os.environ.get("ATROPOS_SKIP_SCHEMATHESIS") != "1" and not failed.is_file():
        subprocess.run(
            ["bash", str(REPO / "scripts" / "setup_schemathesis.sh")],
            timeout=900,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        py = find_schemathesis_python()
    if py is None:
        if failed.is_file():
            pytest.skip("schemathesis could not be installed: " + failed.read_text().strip())
        pytest.skip(
            "no schemathesis: run scripts/setup_schemathesis.sh or set ATROPOS_SCHEMATHESIS_PYTHON"
        )
    return py


@pytest.fixture(scope="session")
def fuzz_model_dir(tmp_path_factory) -> Path:
    """The tiny model (built in under a second) that the engine target serves."""
    from atroposlib.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("fuzz-tiny") / "model", seed=0)

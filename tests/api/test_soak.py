"""A short run of ``bench/soak.py``: pushers + an acking trainer while ``run-api`` is SIGKILLed 3
times and the trainer once; every acknowledged group is trained exactly once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_short_soak_loses_and_duplicates_nothing():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "soak.py"),
            "--api-kills",
            "3",
            "--trainer-kills",
            "1",
            "--interval",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    m = re.search(
        r"acknowledged (\d+), delivered (\d+), trained (\d+), lost (\d+), duplicated (\d+)",
        r.stdout,
    )
    assert m, r.stdout + r.stderr
    acknowledged, delivered, trained, lost, duplicated = map(int, m.groups())
    assert acknowledged > 50 and lost == 0 and duplicated == 0, r.stdout
    assert trained == acknowledged <= delivered, r.stdout
    assert r.returncode == 0

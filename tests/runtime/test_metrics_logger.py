"""use_wandb without credentials goes offline with one log line and never blocks."""

from __future__ import annotations

import os
import subprocess
import sys

from atroposlib.runtime.metrics_logger import NullMetricsLogger, make_metrics_logger

SCRIPT = """
import logging
logging.basicConfig(level=logging.INFO)
from atroposlib.runtime.metrics_logger import make_metrics_logger
m = make_metrics_logger(True, project="p", group=None, name="n", config={"a": 1})
m.log({"x": 1.0}, step=1)
m.finish()
print("LOGGER", type(m).__name__)
"""


def test_no_credentials_means_offline_not_a_hang(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k not in ("WANDB_MODE", "WANDB_API_KEY")}
    environ.update(HOME=str(tmp_path), WANDB_DIR=str(tmp_path), WANDB_SILENT="true")
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=environ,
        cwd=str(tmp_path),
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LOGGER WandbMetricsLogger" in r.stdout
    assert r.stderr.count("no wandb credentials were found: logging wandb OFFLINE") == 1
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_disabled_or_off_is_the_null_logger(monkeypatch):
    assert (
        type(make_metrics_logger(False, project=None, group=None, name=None, config={}))
        is NullMetricsLogger
    )
    monkeypatch.setenv("WANDB_MODE", "disabled")
    null = make_metrics_logger(True, project=None, group=None, name=None, config={})
    assert type(null) is NullMetricsLogger
    null.log({"a": 1})
    assert null.last == {"a": 1}

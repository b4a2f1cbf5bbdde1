"""The suite's pytest-xdist groups hold: under ``--dist loadgroup`` (scripts/test.sh) every test of a file
runs on one worker, so its module-scoped servers start once, and the real-vLLM folder is one group.

Two things broke this silently before: our collection hook ran after pytest-xdist's (which reads the
marks), and pytest 9.2 ignores the node-id suffix pytest-xdist 3.8 writes; either way every test was
scheduled on its own and both workers started the same servers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import _xdist_group

REPO = Path(__file__).resolve().parent.parent
FILES = ("tests/test_errors.py", "tests/envs/test_surface.py")

RECORDER = """
import os

def pytest_runtest_setup(item):
    with open(os.environ["WORKER_LOG"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " " + item.nodeid + "\\n")
"""


def test_each_file_runs_on_one_worker(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "worker_recorder.py").write_text(RECORDER)
    log = tmp_path / "workers.log"
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "WORKER_LOG": str(log),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "worker_recorder", "-p", "no:cacheprovider"]
    cmd += ["-n", "2", "--dist", "loadgroup", *FILES]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        worker, nodeid = line.split(" ", 1)
        workers[nodeid.split("::", 1)[0]].add(worker)
    assert set(workers) == set(FILES)
    assert all(len(w) == 1 for w in workers.values()), dict(workers)


@pytest.mark.parametrize(
    "path,group",
    [
        ("tests/real_vllm/test_vllm_streaming.py", "real-vllm"),
        ("tests/real_vllm/test_proxy_agents.py", "real-vllm"),
        ("tests/launch/test_ray_hosts.py", "tests/launch/test_ray_hosts.py"),
    ],
)
def test_a_shared_fixture_folder_is_one_group_and_other_files_their_own(path, group):
    class Item:
        fspath = REPO / path

    assert _xdist_group(Item()) == group  # type: ignore[arg-type]

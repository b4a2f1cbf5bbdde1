"""Shared fixtures: real `run-api` processes on free loopback ports, offline environment variables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import pytest

from atroposlib.utils.net import free_port, wait_for_http

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class ApiProcess:
    """A `run-api` subprocess; `url` is its base URL. `kill()` is SIGKILL, `stop()` is SIGTERM."""

    def __init__(self, data_dir: Path, extra_args: list[str], port: Optional[int] = None) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir.parent / f"run-api-{self.port}.log"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 60.0) -> ApiProcess:
        cmd = [
            sys.executable,
            "-m",
            "atroposlib.cli.run_api",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for_http(self.url + "/health", timeout=timeout, proc=self.proc)
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def run_api(tmp_path: Path) -> Iterator[Callable[..., ApiProcess]]:
    """Factory: `api = run_api("--store", "memory")` starts a real `run-api` and stops it at teardown.
    `run_api(data_dir=path, port=p)` restarts one on the same data directory and port."""
    started: list[ApiProcess] = []

    def start(
        *extra_args: str, data_dir: Optional[Path] = None, port: Optional[int] = None
    ) -> ApiProcess:
        d = data_dir or (tmp_path / f"api-data-{len(started)}")
        d.mkdir(parents=True, exist_ok=True)
        api = ApiProcess(d, list(extra_args), port=port).start()
        started.append(api)
        return api

    yield start
    for api in started:
        api.stop()


@pytest.fixture
def net_hosts() -> Iterator[Callable[..., object]]:
    """Factory: ``hosts = net_hosts(2, own_name_loopback=True)`` makes real network hosts (namespaces,
    ``tests/hosts.py``) and removes them, with every process on them, at teardown; skips the test with
    the reason where namespaces cannot be made."""
    from contextlib import ExitStack

    from tests.hosts import make_hosts

    with ExitStack() as stack:
        tags = iter(range(1000))

        def make(count: int = 2, **kw: object) -> object:
            kw.setdefault("tag", f"f{next(tags)}")
            return stack.enter_context(make_hosts(count, **kw))

        yield make


# Tests whose expensive session fixtures (servers, clusters, installs) must be made once per run: each
# folder named here runs on one pytest-xdist worker, as one group. Every other test file is a group of
# its own (its module-scoped servers are started once, on one worker). scripts/test.sh runs the suite
# with ``--dist loadgroup``; without xdist the marks change nothing.
SHARED_FIXTURE_GROUPS = {
    "tests/real_vllm": "real-vllm",  # dev_vllm: two vLLM servers started together for the session
}
# groups that take longest go first, so that no worker is left with a long one at the end
LONG_GROUPS_FIRST = (
    "real-vllm",
    "tests/launch/test_ray_hosts.py",
    "tests/launch/test_slurm_hosts.py",
)


def _xdist_group(item: pytest.Item) -> str:
    path = Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parent.parent)
    for folder, group in SHARED_FIXTURE_GROUPS.items():
        if path.is_relative_to(folder):
            return group
    return path.as_posix()


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own collection hook (it appends the
# group to each node id); without it that hook runs first and every test is scheduled on its own.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))

    def rank(item: pytest.Item) -> int:
        group = item.get_closest_marker("xdist_group")
        name = (
            group.args[0] if group and group.args else group.kwargs.get("name", "") if group else ""
        )
        return (
            LONG_GROUPS_FIRST.index(name) if name in LONG_GROUPS_FIRST else len(LONG_GROUPS_FIRST)
        )

    items.sort(key=rank)  # stable: the order inside each rank is the collection order

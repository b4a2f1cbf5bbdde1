"""One way to start a component's process (``launch.spawn.start_logged``), used by the local backend
and by the Ray backend's supervisor: output appended to its log after a ``=== start`` line (naming the
host where the supervisor runs it), no stdin, a process group of its own."""

from __future__ import annotations

import os
import re
import socket
import sys
import time

from atroposlib.launch.spawn import package_root, start_logged
from atroposlib.launch.supervisor import ProcessSupervisor

PROBE = "import os, sys; print(os.getpgid(0) == os.getpid(), repr(sys.stdin.read())); sys.exit(4)"


def test_a_started_process_logs_after_a_start_line_in_its_own_group(tmp_path):
    log = tmp_path / "logs" / "x.log"  # the folder does not exist yet
    argv = [sys.executable, "-c", PROBE]
    for _ in range(2):
        proc = start_logged(argv, dict(os.environ), log)
        assert proc.wait(30) == 4
    lines = log.read_text().split("\n")
    head = r"=== start \d\d:\d\d:\d\d: " + re.escape(" ".join(argv))
    assert [bool(re.fullmatch(head, line)) for line in lines] == [
        False,
        True,
        False,
        False,
        True,
        False,
        False,
    ]
    assert lines[2] == lines[5] == "True ''"  # its own process group; stdin empty; appended


def test_the_host_is_named_and_the_supervisor_starts_the_same_way(tmp_path):
    log = tmp_path / "sup.log"
    sup = ProcessSupervisor(
        "env-e-0",
        "env",
        str(log),
        restart=False,
        supervision={"window_minutes": 1, "max_restarts": 0, "backoff_s": 0, "max_backoff_s": 0},
    )
    sup.start([sys.executable, "-c", PROBE], {})
    deadline = time.monotonic() + 30
    while sup.status()["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sup.status()["exit_code"] == 4
    text = log.read_text()
    assert f" on {socket.gethostname()}: {sys.executable} -c " in text.split("\n")[1]
    assert "True ''" in text


def test_children_import_this_package():
    import atroposlib

    assert os.path.join(package_root(), "atroposlib") == os.path.dirname(atroposlib.__file__)

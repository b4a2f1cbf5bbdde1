"""The host sandbox's isolation, tried for real: no connection out (to a port on the host's loopback,
and to an address on a network namespace made here, both reachable without the sandbox), no write
outside the trial's folders, a uid of its own, and a command past its limit killed with every process
it started (background, ``setsid`` and ``nohup`` children included)."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import threading
import time

import pytest

from atroposlib.interop.harbor.bwrap import CommandLimits
from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir
from atroposlib.interop.harbor.task import read_task
from tests.interop.harbor.conftest import REPO, TASKS

pytestmark = pytest.mark.usefixtures("bwrap")
TASK = TASKS / "train" / "count-00"
CONNECT = "timeout 3 bash -c 'exec 3<>/dev/tcp/{addr}/{port}' 2>/dev/null && echo CONNECTED || echo REFUSED"


def _run(trials, *commands, limits=None):
    """Start a sandbox of TASK under ``trials``, run ``commands`` in it; (sandbox, results)."""

    async def go():
        sandbox = HostSandbox(read_task(TASK), make_trial_dir(trials), limits or CommandLimits())
        await sandbox.start()
        return sandbox, [await sandbox.run(c) for c in commands]

    return asyncio.run(go())


class Listener:
    """A TCP server on the host's loopback counting the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def test_no_connection_to_the_hosts_loopback(trials):
    listener = Listener()
    socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()  # reachable here
    time.sleep(0.1)
    assert listener.accepted == 1
    _, [done] = _run(trials, CONNECT.format(addr="127.0.0.1", port=listener.port))
    assert done.output.strip() == "REFUSED" and listener.accepted == 1
    listener.sock.close()


LISTEN = (
    "import socket, sys\n"
    "s = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "print('listening', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); print('accepted', flush=True); c.close()\n"
)
SANDBOXED = (
    "import asyncio, sys\n"
    "from pathlib import Path\n"
    "from atroposlib.interop.harbor.bwrap import CommandLimits\n"
    "from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir\n"
    "from atroposlib.interop.harbor.task import read_task\n"
    "async def go():\n"
    "    box = HostSandbox(read_task(sys.argv[1]), make_trial_dir(Path(sys.argv[2])), CommandLimits())\n"
    "    await box.start()\n"
    "    print((await box.run(sys.argv[3])).output.strip())\n"
    "    await box.stop()\n"
    "asyncio.run(go())\n"
)


def test_no_connection_to_a_namespace_address_reachable_without_the_sandbox(net_hosts, trials):
    hosts = net_hosts(2)
    host1, host2 = hosts.by_name("host1"), hosts.by_name("host2")
    port = random.randint(20000, 30000)
    server = host2.popen(
        [sys.executable, "-c", LISTEN, host2.addr, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None and server.stdout.readline().strip() == "listening"
    connect = CONNECT.format(addr=host2.addr, port=port)
    plain = host1.run(["bash", "-c", connect], capture_output=True, text=True, timeout=30)
    assert plain.stdout.strip() == "CONNECTED"  # host1 reaches host2 without the sandbox
    assert server.stdout.readline().strip() == "accepted"
    boxed = host1.run(
        [sys.executable, "-c", SANDBOXED, str(TASK), str(trials), connect],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert boxed.returncode == 0 and boxed.stdout.strip() == "REFUSED", boxed.stderr[-2000:]
    server.kill()
    rest = server.communicate(timeout=10)[0]
    assert "accepted" not in rest  # the sandboxed attempt never arrived


def test_no_write_outside_the_trials_folders(trials):
    other = make_trial_dir(trials, "other-")  # another trial's folder on the host
    other.chmod(0o777)
    attempts = " ; ".join(
        f"(echo x > {p}) 2>&1 | tail -n 1"
        for p in (
            "/etc/x",
            "/usr/x",
            "/x",
            "/root/x",
            "/var/x",
            "/home/x",
            f"{other}/x",
            "/proc/sys/kernel/hostname",
        )
    )
    sandbox, [tried, inside, shadow] = _run(
        trials,
        attempts,
        "echo ok > /app/inside && echo t > /tmp/inside && mkdir -p /logs/agent/n && echo done",
        "cat /etc/shadow > /dev/null 2>&1 && echo READ || echo DENIED",
    )
    lines = tried.output.strip().split("\n")
    assert len(lines) == 8 and all(
        "Read-only file system" in line
        or "No such file or directory" in line
        or "Permission denied" in line
        for line in lines
    ), lines
    assert list(other.iterdir()) == [] and not any(
        os.path.exists(p) for p in ("/x", "/etc/x", "/usr/x")
    )
    assert inside.output.strip() == "done"
    assert sandbox.host_path("/app/inside").read_text() == "ok\n"
    assert sandbox.host_path("/tmp/inside").read_text() == "t\n"  # the trial's /tmp, not the host's
    if os.geteuid() == 0:  # the trial's own uid cannot read what only root may
        assert shadow.output.strip() == "DENIED"
    asyncio.run(sandbox.stop())
    assert not sandbox.trial_dir.exists()


def test_each_trial_runs_as_a_uid_of_its_own(trials):
    one, [who] = _run(trials, "id -u; echo x > /app/mine")
    two, _ = _run(trials, "true")
    assert who.output.split()[0] == "1000"
    if os.geteuid() == 0:
        owner = one.host_path("/app/mine").stat().st_uid
        assert owner == one.user and owner >= 260_000 and one.user != two.user


def test_a_command_past_its_limit_is_killed_with_every_process_it_started(trials):
    mark = random.randint(100_000, 999_999)
    command = (
        f"setsid sleep {mark} & (sleep {mark + 1}; echo late > /app/late) & "
        f"nohup bash -c 'while true; do echo beat >> /app/beat; sleep 0.05; done' >/dev/null 2>&1 & "
        f"sleep {mark + 2}"
    )
    sandbox, [done] = _run(trials, command, limits=CommandLimits(timeout_s=1.0))
    assert done.timed_out and done.exit_code is None and done.duration_s < 4
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", f"sleep {mark}"], capture_output=True, text=True)
    assert left.stdout == ""  # nothing the command started is still running
    beats = sandbox.host_path("/app/beat").read_text()
    time.sleep(0.3)
    assert sandbox.host_path("/app/beat").read_text() == beats
    asyncio.run(sandbox.stop())


def test_output_past_the_limit_is_cut_and_counted(trials):
    _, [done] = _run(
        trials, "head -c 10000 /dev/zero | tr '\\0' a", limits=CommandLimits(max_output_bytes=100)
    )
    assert done.output == "a" * 100 and done.truncated_bytes == 9900 and done.exit_code == 0

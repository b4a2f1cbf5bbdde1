"""The real-hosts harness (``tests/hosts.py``): hosts that reach each other only by their own
addresses, each with its own host name, nothing added to the machine's interfaces, and everything
removed afterwards, also after a run that was killed. Skips with the reason where namespaces cannot be
made (not root, no iproute2)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.hosts import NETNS_ETC, PREFIX, Hosts, clean_stale, netns_list

REPO = Path(__file__).resolve().parents[1]
ECHO = textwrap.dedent(
    """
    import socket, sys
    s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen()
    print(s.getsockname()[1], flush=True)
    c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()
    """
)
DIAL = "import socket, sys; print(socket.create_connection((sys.argv[1], int(sys.argv[2])), 5).recv(64).decode())"


def _machine_links() -> str:
    return subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout


def test_hosts_reach_each_other_by_address_and_have_their_own_names(net_hosts):
    before = _machine_links()
    hosts = net_hosts(2, own_name_loopback=True, resolve_others=False)
    a, b = hosts.hosts
    assert (a.addr, b.addr) == ("10.231.0.1", "10.231.0.2")
    server = b.popen([sys.executable, "-c", ECHO, b.addr], stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    dial = a.run([sys.executable, "-c", DIAL, b.addr, port], capture_output=True, text=True)
    assert dial.stdout.strip() == a.addr, dial.stderr  # b saw a's own address
    server.wait(10)
    names = a.run(
        [
            sys.executable,
            "-c",
            "import socket; n = socket.gethostname(); print(n, socket.gethostbyname(n))",
        ],
        capture_output=True,
        text=True,
    )
    assert names.stdout.split() == ["host1", "127.0.1.1"]  # Debian's default: the name is loopback
    other = a.run(["getent", "hosts", "host2"], capture_output=True)
    assert other.returncode != 0  # resolve_others=False: no DNS for the other host's name
    assert _machine_links() == before  # nothing was added to the machine's own interfaces
    assert "10.231.0." not in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout


def test_an_unplugged_host_is_cut_off_until_plugged_back(net_hosts):
    a, b = net_hosts(2).hosts
    ping = [
        sys.executable,
        "-c",
        "import socket, sys; socket.create_connection((sys.argv[1], 9), 2)",
    ]
    refused = a.run(ping + [b.addr], capture_output=True, text=True)
    assert "ConnectionRefused" in refused.stderr  # reachable: the port is closed, the host answers
    b.link(False)
    cut = a.run(ping + [b.addr], capture_output=True, text=True)
    assert "TimeoutError" in cut.stderr or "timed out" in cut.stderr
    b.link(True)
    assert "ConnectionRefused" in a.run(ping + [b.addr], capture_output=True, text=True).stderr


def test_close_ends_everything_on_the_hosts_and_removes_them():
    hosts = Hosts(2, tag="close").up()
    try:
        sleeper = hosts.hosts[1].popen(["sleep", "600"])
        frozen = hosts.hosts[0].popen(["sleep", "600"])
        deadline = time.monotonic() + 10
        while frozen.pid not in hosts.hosts[0].pids() and time.monotonic() < deadline:
            time.sleep(0.05)  # until it runs on the host (ip netns exec has switched)
        frozen.send_signal(signal.SIGSTOP)
        names = [h.netns for h in hosts.hosts] + [hosts.switch]
        assert set(names) <= set(netns_list())
    finally:
        hosts.close()
    assert sleeper.wait(10) == -signal.SIGKILL and frozen.wait(10) == -signal.SIGKILL
    assert not set(names) & set(netns_list())
    assert not any((NETNS_ETC / n).exists() for n in names)
    assert not hosts.uts_dir.exists()


def test_hosts_of_a_killed_run_are_removed_by_the_next_one(tmp_path):
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from tests.hosts import Hosts; "
        "h = Hosts(2, tag='orphan').up(); h.hosts[0].popen(['sleep', '600']); print('up', flush=True); "
        "time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(REPO)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "up"
    finally:
        proc.kill()
        proc.wait(10)
    left = [n for n in netns_list() if n.startswith(f"{PREFIX}{proc.pid}-orphan")]
    assert len(left) == 3  # what a killed run leaves: two hosts and the switch
    assert f"{PREFIX}{proc.pid}-orphan" in clean_stale()
    assert not [n for n in netns_list() if n.startswith(f"{PREFIX}{proc.pid}-")]


def test_the_command_refuses_a_name_already_taken_with_one_line(tmp_path):
    name = f"t{int(time.time() * 1000) % 10**8}"
    cli = [sys.executable, "-m", "tests.hosts"]
    up = subprocess.run([*cli, "up", name], cwd=REPO, capture_output=True, text=True)
    if up.returncode == 2 and "cannot make hosts here" in up.stderr:
        pytest.skip(up.stderr.strip())
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.split()[:2] == ["host1", "10.231.0.1"]
        again = subprocess.run([*cli, "up", name], cwd=REPO, capture_output=True, text=True)
        assert again.returncode == 2
        assert again.stderr.splitlines() == [
            f"hosts: error: hosts {name!r} already exist (python -m tests.hosts down {name})"
        ]
        ran = subprocess.run(
            [*cli, "exec", name, "host2", "--", "hostname"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert ran.stdout.strip() == "host2"
    finally:
        down = subprocess.run([*cli, "down", name], cwd=REPO, capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert not [n for n in netns_list() if n.startswith(f"{PREFIX}cli-{name}-")]

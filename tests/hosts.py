"""Real network hosts on one machine, for multi-node tests: N network namespaces joined by a switch.

Each host is a network namespace with one interface (``eth0``, address ``SUBNET.k`` of a /24) plugged
into a bridge that lives in a namespace of its own (the switch), its own host name (a UTS namespace
kept open by a bind mount) and its own ``/etc/hosts`` (``ip netns exec`` mounts ``/etc/netns/NS/hosts``
over ``/etc/hosts``). Nothing is added to the machine's own interfaces or routes: every address exists
only inside the namespaces made here, so tests may use them freely and nothing else can reach them.

``own_name_loopback=True`` gives each host Debian's default ``/etc/hosts``: its own name resolves to
127.0.1.1, the configuration in which software that finds "its address" from the host name picks
loopback; ``resolve_others=False`` leaves the other hosts' names unresolvable (no DNS), so anything
that hands out host names instead of addresses fails too.

In tests, ``make_hosts`` (the ``net_hosts`` fixture of ``tests/conftest.py``, or a ``with`` block in a
module-scoped fixture) makes them and skips the test with the reason where they cannot be made.

``Hosts.close`` ends every process running in the namespaces (``ip netns pids``), deletes them and
everything made for them; a pytest fixture calls it on failure and Ctrl-C too. A run killed before it
could clean up leaves namespaces named ``athosts-PID-...``: the next ``Hosts`` (or ``python -m
tests.hosts clean``) removes those whose PID is gone.

As a command, for trying things by hand (one line and exit 2 for a usage mistake, such as a name
already taken)::

    python -m tests.hosts up NAME [--hosts 2] [--own-name-loopback]   # prints each host
    python -m tests.hosts exec NAME HOST -- CMD ...                    # CMD on that host
    python -m tests.hosts down NAME
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

PREFIX = "athosts-"
UTS_ROOT = Path("/run/athosts")
NETNS_ETC = Path("/etc/netns")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")


class HostsUnavailable(Exception):
    """Namespaces cannot be made here (not root, no ``ip``, a kernel without them): tests skip."""


class HostsError(Exception):
    """A usage mistake (a name already taken, a bad name): one line for the user."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise HostsError(f"ip {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def netns_list() -> list[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


_UNMOUNT_OPTS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec"}


@functools.lru_cache(maxsize=1)
def _cgroup_prelude() -> str:
    """Shell lines that mount the machine's cgroup file systems again under /sys/fs/cgroup."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ""
    lines = []
    for line in mounts:
        parts = line.split()
        if len(parts) < 4 or not parts[1].startswith("/sys/fs/cgroup"):
            continue
        src, target, fstype, opts = parts[:4]
        if fstype not in ("tmpfs", "cgroup", "cgroup2"):
            continue
        keep = ",".join(o for o in opts.split(",") if o not in _UNMOUNT_OPTS)
        flag = f"-o {shlex.quote(keep)} " if keep else ""
        lines.append(
            f"mkdir -p {shlex.quote(target)} 2>/dev/null; mount -t {fstype} {flag}"
            f"{shlex.quote(src)} {shlex.quote(target)} 2>/dev/null;"
        )
    return " ".join(lines)


def check_available() -> None:
    """Raise ``HostsUnavailable`` with the reason when namespaces cannot be made here."""
    if os.geteuid() != 0:
        raise HostsUnavailable("network namespaces need root")
    for tool in ("ip", "nsenter", "unshare", "mount", "umount"):
        if shutil.which(tool) is None:
            raise HostsUnavailable(f"{tool} is not installed (iproute2, util-linux)")
    probe = f"{PREFIX}probe-{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        raise HostsUnavailable(f"ip netns add fails here: {done.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)


@dataclass
class Host:
    """One host: its host name, namespace, address and interface."""

    name: str
    netns: str
    addr: str
    uts: Path
    port: str  # its cable's end in the switch namespace
    switch: str
    iface: str = "eth0"

    def cmd(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host (its network, its /etc/hosts, its host name). ``ip netns exec``
        mounts a fresh /sys, which hides the machine's cgroup mounts; they are mounted again first
        (slurmd refuses to start without them), then ``argv`` replaces the shell."""
        enter = ["ip", "netns", "exec", self.netns, "nsenter", f"--uts={self.uts}", "--"]
        prelude = _cgroup_prelude()
        if not prelude:
            return [*enter, *argv]
        return [*enter, "sh", "-c", prelude + ' exec "$@"', "sh", *argv]

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        kw.setdefault("start_new_session", True)
        return subprocess.Popen(self.cmd(argv), **kw)

    def run(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.cmd(argv), **kw)

    def pids(self) -> list[int]:
        """Every process running on this host."""
        return netns_pids(self.netns)

    def signal_all(self, sig: int) -> list[int]:
        """Send ``sig`` to every process on this host (SIGKILL: the machine is lost; SIGSTOP: it
        freezes; SIGCONT: it thaws); the pids signalled."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def link(self, up: bool) -> None:
        """Plug (``up``) or unplug this host's cable at the switch: a network outage, nothing else."""
        _ip("-n", self.switch, "link", "set", self.port, "up" if up else "down")


@dataclass
class Hosts:
    """``count`` hosts named ``names`` (default ``host1``, ``host2``, ...) on ``SUBNET.0/24``."""

    count: int = 2
    tag: str = "t"
    subnet: str = "10.231.0"
    names: Optional[list[str]] = None
    own_name_loopback: bool = False
    resolve_others: bool = True  # False: no host resolves another's name (a cluster without DNS)
    base: str = ""  # namespace names start with it (default athosts-PID-TAG)
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.count <= 200:
            raise HostsError(f"--hosts {self.count}: between 1 and 200")
        if not _NAME.match(self.tag):
            raise HostsError(f"{self.tag!r}: a name is lowercase letters, digits and '-'")
        self.names = self.names or [f"host{k + 1}" for k in range(self.count)]
        if len(self.names) != self.count:
            raise HostsError(f"{len(self.names)} names for {self.count} hosts")
        self.base = self.base or f"{PREFIX}{os.getpid()}-{self.tag}"
        self.switch = f"{self.base}-sw"
        self.uts_dir = UTS_ROOT / self.base.removeprefix(PREFIX)
        self._made: list[str] = []

    # --- making them -------------------------------------------------------------------------
    def up(self) -> Hosts:
        check_available()
        clean_stale()
        taken = set(netns_list())
        wanted = [self.switch] + [f"{self.base}-{k + 1}" for k in range(self.count)]
        clash = [n for n in wanted if n in taken]
        if clash:
            raise HostsError(
                f"network namespace {clash[0]} already exists (python -m tests.hosts down)"
            )
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def _make(self) -> None:
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        self.uts_dir.mkdir(parents=True, exist_ok=True)
        assert self.names is not None
        addrs = {name: f"{self.subnet}.{k + 1}" for k, name in enumerate(self.names)}
        for k, name in enumerate(self.names):
            ns, port = f"{self.base}-{k + 1}", f"p{k + 1}"
            _ip("netns", "add", ns)
            self._made.append(ns)
            # both ends are created inside namespaces: nothing appears in the machine's own
            veth = ["eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.switch]
            _ip("link", "add", *veth)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{addrs[name]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            lines = ["127.0.0.1 localhost"]
            if self.own_name_loopback:
                lines.append(f"127.0.1.1 {name}")  # Debian's default: the host name is loopback
            lines += [
                f"{a} {n}"
                for n, a in addrs.items()
                if (n == name and not self.own_name_loopback) or (n != name and self.resolve_others)
            ]
            (etc / "hosts").write_text("\n".join(lines) + "\n")
            (etc / "hostname").write_text(name + "\n")
            uts = self.uts_dir / name
            uts.touch()
            done = subprocess.run(
                ["unshare", f"--uts={uts}", "hostname", name], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise HostsUnavailable(f"unshare --uts fails here: {done.stderr.strip()}")
            self.hosts.append(Host(name, ns, addrs[name], uts, port, self.switch))

    # --- removing them -----------------------------------------------------------------------
    def close(self) -> None:
        """End every process on the hosts, then remove the namespaces and what was made for them."""
        _teardown(self.base)

    def __enter__(self) -> Hosts:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def by_name(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def describe(self) -> list[dict[str, str]]:
        return [{"name": h.name, "netns": h.netns, "addr": h.addr} for h in self.hosts]


def _teardown(base: str) -> None:
    """Kill every process in the namespaces ``base-*``, delete them, their /etc/netns folders and
    their host-name namespaces."""
    mine = [n for n in netns_list() if n.startswith(base + "-")]
    pids = [p for n in mine for p in netns_pids(n)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _pid_alive(p) and not _zombie(p)]
        time.sleep(0.05)
    for n in mine:
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(NETNS_ETC / n, ignore_errors=True)
    uts_dir = UTS_ROOT / base.removeprefix(PREFIX)
    if uts_dir.is_dir():
        for f in uts_dir.iterdir():
            subprocess.run(["umount", str(f)], capture_output=True)
            f.unlink(missing_ok=True)
        uts_dir.rmdir()


@contextmanager
def make_hosts(count: int = 2, **kw: Any) -> Iterator[Hosts]:
    """``Hosts(count, **kw)`` for a test: skipped with the reason where namespaces cannot be made;
    removed, with everything running on them, when the block ends (failure and Ctrl-C included)."""
    import pytest

    hosts = Hosts(count, **kw)
    try:
        hosts.up()
    except HostsUnavailable as e:
        pytest.skip(f"no network namespaces here: {e}")
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so this block still removes the hosts
    main = threading.current_thread() is threading.main_thread()
    old = signal.getsignal(signal.SIGTERM) if main else None
    if main and old == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield hosts
    finally:
        hosts.close()
        if main and old == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def clean_stale() -> list[str]:
    """Remove the namespaces of earlier runs whose process is gone; the prefixes removed."""
    bases = set()
    for n in netns_list():
        m = re.match(rf"^({PREFIX}(\d+)-[a-z0-9-]+?)-(sw|\d+)$", n)
        if m and not _pid_alive(int(m.group(2))):
            bases.add(m.group(1))
    for base in sorted(bases):
        _teardown(base)
    return sorted(bases)


# --- the command -----------------------------------------------------------------------------
_STATE = UTS_ROOT / "cli"


def _cli_state(name: str) -> Path:
    return _STATE / f"{name}.json"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hosts", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="make hosts (they stay until `down`)")
    up.add_argument("name")
    up.add_argument("--hosts", type=int, default=2)
    up.add_argument(
        "--subnet", default="10.231.0", help="the first three octets (default 10.231.0)"
    )
    up.add_argument("--own-name-loopback", action="store_true")
    ex = sub.add_parser("exec", help="run a command on one host")
    ex.add_argument("name")
    ex.add_argument("host")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    down = sub.add_parser("down", help="end everything on the hosts and remove them")
    down.add_argument("name")
    sub.add_parser("clean", help="remove hosts left by runs that were killed")
    args = p.parse_args(argv)
    try:
        return _main(args)
    except HostsUnavailable as e:
        print(f"hosts: error: cannot make hosts here: {e}", file=sys.stderr)
        return 2
    except HostsError as e:
        print(f"hosts: error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.cmd == "clean":
        for base in clean_stale():
            print(f"removed {base}")
        return 0
    path = _cli_state(args.name)
    if args.cmd == "up":
        if not re.match(r"^\d{1,3}\.\d{1,3}\.\d{1,3}$", args.subnet):
            raise HostsError(f"--subnet {args.subnet!r}: the first three octets, e.g. 10.231.0")
        if path.exists():
            raise HostsError(
                f"hosts {args.name!r} already exist (python -m tests.hosts down {args.name})"
            )
        hosts = Hosts(
            args.hosts,
            tag=args.name,
            subnet=args.subnet,
            own_name_loopback=args.own_name_loopback,
            base=f"{PREFIX}cli-{args.name}",  # no pid: never taken for stale; `down` removes it
        )
        hosts.up()
        _STATE.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"base": hosts.base, "hosts": hosts.describe()}))
        for h in hosts.hosts:
            print(f"{h.name}\t{h.addr}\t{h.netns}")
        return 0
    if not path.exists():
        raise HostsError(f"no hosts named {args.name!r} (python -m tests.hosts up {args.name})")
    state = json.loads(path.read_text())
    if args.cmd == "down":
        _teardown(state["base"])
        path.unlink()
        return 0
    row = next((h for h in state["hosts"] if h["name"] == args.host), None)
    if row is None:
        names = ", ".join(h["name"] for h in state["hosts"])
        raise HostsError(f"{args.name} has no host {args.host!r} (it has {names})")
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise HostsError("exec: give a command after --")
    uts = UTS_ROOT / state["base"].removeprefix(PREFIX) / args.host
    host = Host(args.host, row["netns"], row["addr"], uts, "", "")
    return subprocess.run(host.cmd(argv)).returncode


if __name__ == "__main__":
    sys.exit(main())

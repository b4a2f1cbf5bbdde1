"""The node's own address for a trainer spanning nodes: ``python -m atroposlib.launch.node_net
--rdzv HOST[:PORT] [--addr IP] -- COMMAND``.

torchrun and the collective backends find "this node's address" from the host name by default. Where
the host name resolves to loopback (Debian's default ``/etc/hosts``: ``127.0.1.1 HOSTNAME``), gloo
listens on and advertises 127.0.1.1, and the other nodes connect to themselves: the ranks get through
the rendezvous and then never complete a collective. The launcher therefore starts each trainer node
through this wrapper, which takes the node's address (``--addr``, as on Ray where the actor reports it;
by default the local address this node reaches the rendezvous host from, as in a SLURM job), finds the
interface holding it, and runs the command with

* ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` set to that interface (unless already set),
* torchrun's ``--local-addr ADDR`` (unless given), so the rendezvous hands out that address, not a name
  the other nodes may not resolve, and
* ``--rdzv-conf is_host=1`` on the node whose address is the rendezvous host's (``is_host=0``
  elsewhere) unless the command sets ``--rdzv-conf``: torchrun otherwise decides it from its host name,
  and where that resolves to loopback no node hosts the store; with it ``read_timeout`` (5 min, not
  torchrun's 60 s), so a node that starts first waits for node 0's store.

An address no interface of this node holds, a loopback address while the rendezvous host is not on
loopback, or a host that cannot be resolved is one line on stderr and exit 2: the trainer never starts
with an address that cannot work.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import os
import socket
import struct
import sys
from typing import Optional

from atroposlib.errors import ConfigError
from atroposlib.utils.cli import USAGE_ERROR

PROG = "atroposlib.launch.node_net"
_SIOCGIFADDR = 0x8915
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
RDZV_READ_TIMEOUT_S = 300
"""torchrun's c10d ``read_timeout`` for the trainer nodes: how long a node waits to reach the store node
0 hosts (torchrun's default, 60 s, fails the other nodes with ``RendezvousConnectionError`` when node 0
starts later than that: a loaded node, a cold ``import torch``, a resume whose node came back first)."""


def rdzv_conf(is_host: bool) -> str:
    """torchrun's ``--rdzv-conf`` value for a trainer node: whether it hosts the store, and the wait."""
    return f"is_host={int(is_host)},read_timeout={RDZV_READ_TIMEOUT_S}"


_TORCHRUN = ("torch.distributed.run", "torchrun")


def interface_addresses() -> dict[str, str]:
    """IPv4 address of each interface of this host that has one (Linux)."""
    out: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                res = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)
            except OSError:  # no IPv4 address on it
                continue
            out[name] = socket.inet_ntoa(res[20:24])
    return out


def interface_of(addr: str) -> Optional[str]:
    """The interface holding ``addr`` on this host, or None."""
    return next((n for n, a in interface_addresses().items() if a == addr), None)


def resolve(host: str) -> str:
    """``host``'s IPv4 address as this host resolves it."""
    try:
        return str(socket.getaddrinfo(host, 9, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0])
    except socket.gaierror as e:
        raise ConfigError(f"cannot resolve {host!r} on {socket.gethostname()}: {e}") from None


def address_toward(host: str) -> str:
    """The local address this host uses to reach ``host`` (no packet is sent)."""
    target = resolve(host)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((target, 9))
        except OSError as e:
            raise ConfigError(
                f"{host} ({target}) is unreachable from {socket.gethostname()}: {e.strerror or e}"
            ) from None
        return str(s.getsockname()[0])


def _split(rdzv: str) -> str:
    """The host of ``HOST[:PORT]``."""
    host, sep, port = rdzv.rpartition(":")
    return host if sep and port.isdigit() else rdzv


def node_address(addr: Optional[str], rdzv: str) -> tuple[str, str, bool]:
    """(this node's address, the interface holding it, whether it is the rendezvous host);
    ``ConfigError`` when it cannot work."""
    here = socket.gethostname()
    host = _split(rdzv)
    target = resolve(host)
    what = "--addr" if addr else f"the address toward {host}"
    if addr:
        try:
            ipaddress.IPv4Address(addr)
        except ValueError:
            raise ConfigError(f"--addr {addr!r}: not an IPv4 address") from None
    else:
        addr = address_toward(host)
    # loopback works only when the rendezvous is on loopback too: every node on this one machine
    if ipaddress.IPv4Address(addr).is_loopback and not ipaddress.IPv4Address(target).is_loopback:
        raise ConfigError(
            f"{what} is {addr}, a loopback address on {here}: the other nodes cannot reach it "
            "(a host name resolving to loopback? give the nodes' own addresses)"
        )
    iface = interface_of(addr)
    if iface is None:
        raise ConfigError(f"no interface of {here} holds {addr}")
    return addr, iface, addr == target


def _given(argv: list[str], flag: str) -> bool:
    return flag in argv or any(a.startswith(flag + "=") for a in argv)


def with_local_addr(argv: list[str], addr: str, is_host: Optional[bool] = None) -> list[str]:
    """``argv`` with torchrun's ``--local-addr addr`` when it is a torchrun without one, and, when
    ``is_host`` is known, ``--rdzv-conf is_host=0|1`` unless the command sets ``--rdzv-conf``:
    torchrun decides whether it hosts the rendezvous store by comparing the endpoint with what its
    host name resolves to, which fails on a loopback host name (then no node hosts it)."""
    for i, arg in enumerate(argv):
        if arg in _TORCHRUN or os.path.basename(arg) == "torchrun":
            extra = [] if _given(argv, "--local-addr") else ["--local-addr", addr]
            if is_host is not None and not _given(argv, "--rdzv-conf"):
                extra += ["--rdzv-conf", rdzv_conf(is_host)]
            return argv[: i + 1] + extra + argv[i + 1 :]
    return list(argv)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Run a trainer node on its own address.")
    p.add_argument("--rdzv", required=True, metavar="HOST[:PORT]", help="the rendezvous endpoint")
    p.add_argument("--addr", help="this node's address (default: the one it reaches HOST from)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        print(f"{PROG}: error: no command after --", file=sys.stderr)
        return USAGE_ERROR
    try:
        addr, iface, is_host = node_address(args.addr, args.rdzv)
    except ConfigError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    env = dict(os.environ)
    for var in IFNAME_VARS:
        env.setdefault(var, iface)
    env.setdefault("ATROPOS_NODE_ADDR", addr)
    given = with_local_addr(cmd, addr, is_host)
    how = ", ".join(f"{v}={env[v]}" for v in IFNAME_VARS)
    if given != cmd:  # what was inserted after torchrun's name
        at = next(i for i, (a, b) in enumerate(zip(given, cmd + [""], strict=False)) if a != b)
        how += ", torchrun " + " ".join(given[at : at + len(given) - len(cmd)])
    print(
        f"[node_net] {socket.gethostname()}: {addr} on {iface} ({how})", file=sys.stderr, flush=True
    )
    os.execvpe(given[0], given, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())

"""Connecting the launcher to an existing Ray cluster, with every refusal one line (``ConfigError``)
before anything starts: ray not installed, an address where nothing answers (probed with a short TCP
connect first: Ray's own connect can block for a long time), a cluster lacking the GPUs or the node
resources the topology asks for. ``import ray`` happens here, only when the Ray backend runs."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any, Optional

from atroposlib.errors import ConfigError
from atroposlib.launch.plan import Plan
from atroposlib.launch.ray_placement import PIN_AMOUNT, ray_units
from atroposlib.launch.spawn import package_root

INSTALL_HINT = "pip install 'atroposlib[ray]'"
PROBE_TIMEOUT_S = 3.0


def import_ray() -> Any:
    """The ``ray`` module, or a ``ConfigError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--backend ray: ray is not installed ({INSTALL_HINT})") from None
    return ray


def resolve_address(address: Optional[str]) -> str:
    """``--ray-address``, else ``RAY_ADDRESS``; one of them must name the cluster."""
    value = address or os.environ.get("RAY_ADDRESS", "")
    if not value:
        raise ConfigError(
            "--backend ray needs --ray-address HOST:PORT (the head's address, as `ray start --head` "
            "prints it) or RAY_ADDRESS"
        )
    return value


def _host_port(address: str) -> Optional[tuple[str, int]]:
    if address in ("auto", "local"):
        return None  # Ray finds the cluster on this machine itself (and says so quickly when none)
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT (or ray://HOST:PORT)")
    return host.strip("[]"), int(port)


def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """A TCP connect to ``address`` within ``timeout`` s, or a ``ConfigError``."""
    where = _host_port(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=timeout):
            pass
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e)).lower()
        raise ConfigError(
            f"--ray-address {address}: nothing answers at {where[0]}:{where[1]} ({why}); "
            "is the Ray cluster up (ray start --head)?"
        ) from None


def connect(address: str, namespace: str) -> Any:
    """``ray.init`` on the existing cluster at ``address``; the ``ray`` module."""
    ray = import_ray()
    probe(address)
    path = os.pathsep.join(p for p in (package_root(), os.environ.get("PYTHONPATH", "")) if p)
    try:
        ray.init(
            address=address,
            namespace=namespace,
            log_to_driver=False,
            logging_level=logging.WARNING,
            runtime_env={"env_vars": {"PYTHONPATH": path}},
        )
    except Exception as e:  # ray raises ConnectionError, RuntimeError, ValueError, ...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(
            f"--ray-address {address}: could not join the Ray cluster: {first}"
        ) from None
    return ray


def check_cluster(ray: Any, plan: Plan, address: str) -> None:
    """The cluster has the GPUs and the pinned node resources ``plan`` needs; else ``ConfigError``."""
    have = ray.cluster_resources()
    units, _ = ray_units(plan)
    want = sum(u.gpus for u in units)
    gpus = int(have.get("GPU", 0))
    if want > gpus:
        raise ConfigError(
            f"the topology asks for {want} GPU(s) but the Ray cluster at {address} has {gpus} "
            "(set gpus: 0 to run on CPU)"
        )
    alive = sum(1 for n in ray.nodes() if n.get("Alive"))
    pinned = plan.topology.cluster.ray_nodes
    if not pinned and plan.topology.cluster.nodes > alive:
        raise ConfigError(
            f"the topology asks for {plan.topology.cluster.nodes} nodes (cluster.nodes) but the Ray "
            f"cluster at {address} has {alive}"
        )
    pins: dict[str, int] = {}
    for u in units:
        if u.pin:
            pins[u.pin] = pins.get(u.pin, 0) + 1
    for pin, count in pins.items():
        if pin not in have:
            known = sorted(k for k in have if k not in ("CPU", "GPU", "memory"))
            if pin.startswith("node:"):
                where = f"no node has the address {pin[5:]} (ray start --node-ip-address {pin[5:]})"
            else:
                hint = f"ray start --resources '{{\"{pin}\": 1}}'"
                where = f"no node has the resource {pin!r} ({hint})"
            raise ConfigError(
                f"cluster.ray_nodes: node {pinned.index(pin)} of the topology is on none of the "
                f"{alive} node(s) of the Ray cluster at {address}: {where}; it has "
                f"{', '.join(known)}"
            )
        if have[pin] < count * PIN_AMOUNT:
            raise ConfigError(
                f"cluster.ray_nodes: {pin} has {have[pin]:g}, the run needs {count * PIN_AMOUNT:g}"
            )


__all__ = ["INSTALL_HINT", "check_cluster", "connect", "import_ray", "probe", "resolve_address"]

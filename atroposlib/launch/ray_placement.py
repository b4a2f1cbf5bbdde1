"""How each component of a plan is placed on a Ray cluster (pure: no ``import ray`` here).

Every component becomes one Ray actor that runs it as a supervised process; a trainer spanning N nodes
becomes N actors, one ``torchrun`` each (``trainer``, ``trainer-node1``, ...). CPU components reserve no
CPU (``num_cpus=0``). A component with GPUs gets a placement group reserved before it starts: one bundle
holding an inference server's GPUs (a server's GPUs are on one node), one bundle per trainer node
(``STRICT_SPREAD`` over nodes unless nodes are pinned). With ``cluster.ray_nodes`` set, logical node k
of the plan is the Ray resource ``ray_nodes[k]`` (a custom resource given with ``ray start --resources``,
or Ray's own ``node:IP``) and each actor asks for ``PIN_AMOUNT`` of it; without it Ray places freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.launch.node_net import rdzv_conf
from atroposlib.launch.plan import Component, Plan

PIN_AMOUNT = 0.001


@dataclass
class RayUnit:
    """One actor: the component it runs (a trainer node of it), and where Ray may put it."""

    name: str
    comp: Component
    node: int  # the plan's logical node
    gpus: int = 0
    pin: Optional[str] = None  # the Ray resource standing for ``node``, when pinned
    group: Optional[str] = None  # its placement group (components with GPUs)
    bundle: int = 0
    trainer_node: int = 0
    argv: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return f"logs/{self.name}.log"

    def resources(self) -> dict[str, float]:
        return {self.pin: PIN_AMOUNT} if self.pin else {}


@dataclass
class RayGroup:
    """A placement group: its bundles and strategy."""

    name: str
    bundles: list[dict[str, float]]
    strategy: str


def _with_host_flag(argv: list[str], node: int) -> list[str]:
    """torchrun of trainer node ``node``: node 0 hosts the rendezvous store, the others join it."""
    if "--rdzv-endpoint" not in argv:
        return list(argv)
    i = argv.index("--rdzv-endpoint") + 2
    return argv[:i] + ["--rdzv-conf", rdzv_conf(node == 0)] + argv[i:]


def ray_units(plan: Plan) -> tuple[list[RayUnit], list[RayGroup]]:
    """The actors and placement groups of ``plan``, in start order (prepare steps are not included:
    they run on the launcher's machine)."""
    topo = plan.topology
    pins = topo.cluster.ray_nodes
    units: list[RayUnit] = []
    groups: list[RayGroup] = []
    for c in plan.components:
        if c.external or c.role == "prepare":
            continue
        if c.role == "trainer":
            per_node = topo.trainer.gpus_per_node
            gname = "trainer" if per_node else None
            bundles = []
            for j, node in enumerate(c.nodes):
                pin = pins[node] if pins else None
                unit = RayUnit(
                    "trainer" if j == 0 else f"trainer-node{j}",
                    c,
                    node,
                    gpus=per_node,
                    pin=pin,
                    group=gname,
                    bundle=j,
                    trainer_node=j,
                    argv=_with_host_flag(c.argv, j) if len(c.nodes) > 1 else list(c.argv),
                )
                units.append(unit)
                bundles.append({"GPU": float(per_node), **unit.resources()})
            if gname:
                spread = "SPREAD" if pins else "STRICT_SPREAD"
                groups.append(
                    RayGroup(gname, bundles, spread if len(bundles) > 1 else "STRICT_PACK")
                )
            continue
        node = c.nodes[0]
        pin = pins[node] if pins else None
        gname = c.name if c.gpus else None
        unit = RayUnit(c.name, c, node, len(c.gpus), pin, gname, argv=list(c.argv))
        units.append(unit)
        if gname:
            groups.append(
                RayGroup(gname, [{"GPU": float(len(c.gpus)), **unit.resources()}], "STRICT_PACK")
            )
    return units, groups


def describe_units(plan: Plan) -> list[list[str]]:
    """Rows for ``--dry-run``: component, node, Ray request, URL, log."""
    units, groups = ray_units(plan)
    by_name = {g.name: g for g in groups}
    rows = [["COMPONENT", "NODE", "RAY", "URL", "LOG"]]
    for u in units:
        where = f"node{u.node} ({u.pin})" if u.pin else "any"
        ask: list[str] = ["num_cpus=0"]
        if u.pin:
            ask.append(f"{u.pin}={PIN_AMOUNT:g}")
        if u.group:
            g = by_name[u.group]
            ask.append(f"pg {g.name}[{u.bundle}] {g.strategy} GPU={u.gpus}")
        rows.append([u.name, where, " ".join(ask), u.comp.url or "-", u.log])
    for c in plan.components:
        if c.external:
            rows.append([c.name, "external", "-", c.url or "-", "-"])
        elif c.role == "prepare":
            rows.append([c.name, "launcher", "-", "-", c.log])
    return rows


def needed_resources(plan: Plan) -> dict[str, Any]:
    """GPUs and pinned resources the run needs from the cluster (checked when it connects)."""
    units, _ = ray_units(plan)
    return {
        "GPU": sum(u.gpus for u in units),
        "pins": sorted({u.pin for u in units if u.pin}),
    }


__all__ = ["PIN_AMOUNT", "RayGroup", "RayUnit", "describe_units", "needed_resources", "ray_units"]

"""``--dry-run`` text and ``status`` tables: what runs where, as plain aligned columns."""

from __future__ import annotations

import shlex
from typing import Any

from atroposlib.launch.plan import Plan


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _where(plan: Plan, nodes: list[int]) -> str:
    if plan.backend == "local":
        return "this machine"
    return ",".join(f"node{k}" for k in nodes) or "-"


def describe_plan(plan: Plan) -> str:
    """Every component: where it runs, its GPUs, URL, log, and its command."""
    rows = [["COMPONENT", "WHERE", "GPUS", "URL", "LOG"]]
    for c in plan.components:
        where = "external" if c.external else _where(plan, c.nodes)
        gpus = ",".join(str(g) for g in c.gpus) or "-"
        rows.append([c.name, where, gpus, c.url or "-", "-" if c.external else c.log])
    commands = [(c.name, c.env, c.argv) for c in plan.components if not c.external]
    if plan.backend == "ray":
        from atroposlib.launch.ray_placement import describe_units, ray_units

        rows = describe_units(plan)
        units, _ = ray_units(plan)
        commands = [(c.name, c.env, c.argv) for c in plan.components if c.role == "prepare"]
        commands += [(u.name, u.comp.env, u.argv) for u in units]
    lines = [f"# {plan.topology.name}: {len(plan.components)} components, backend {plan.backend}"]
    lines += [f"# run directory {plan.out}", table(rows), "", "# commands (start order)"]
    for name, cenv, argv in commands:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in cenv.items())
        cmd = " ".join(shlex.quote(a) for a in argv)
        lines.append(f"{name}: {env + ' ' if env else ''}{cmd}")
    if plan.backend == "local":
        lines.append("# ports are free loopback ports picked now; a real run picks its own")
    elif plan.backend == "ray":
        lines.append(
            "# @HOST@ is the address of the node Ray places a component on; each @NODEk@:PORT "
            "becomes that component's node address and a free port there; Ray sets "
            "CUDA_VISIBLE_DEVICES from the GPUs it gives each actor"
        )
    else:
        lines.append(f"# @NODEk@ is node k of the {plan.nodes}-node allocation")
    return "\n".join(lines)


def describe_state(state: dict[str, Any]) -> str:
    """The ``status`` table of a state file."""
    rows = [["COMPONENT", "WHERE", "STATE", "RESTARTS", "URL", "PID", "LOG"]]
    for c in state["components"]:
        rows.append(
            [
                str(c.get("name")),
                str(c.get("where") or "-"),
                str(c.get("state")),
                str(c.get("restarts", 0)),
                str(c.get("url") or "-"),
                str(c.get("pid") or "-"),
                str(c.get("log") or "-"),
            ]
        )
    head = f"run: {state.get('state')}"
    if state.get("message"):
        head += f" ({state['message']})"
    head += f"  backend {state.get('backend')}  metrics {state.get('metrics', '-')}"
    return head + "\n" + table(rows)


__all__ = ["describe_plan", "describe_state", "table"]

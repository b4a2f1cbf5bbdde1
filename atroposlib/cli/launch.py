"""``atropos-launch``: run a topology file (API, inference servers, env workers, trainer) anywhere.

``run TOPOLOGY [--backend local|ray|slurm] [--ray-address HOST:PORT] [--out DIR] [--dry-run] [--resume]
[--set KEY=VALUE]``,
``status DIR``, ``stop DIR``. See docs/scale.md. A user mistake is one line on stderr and exit 2 with
nothing started.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import yaml

from atroposlib.errors import ConfigError
from atroposlib.utils.cli import fail
from atroposlib.utils.yaml_config import load_yaml_mapping

PROG = "atropos-launch"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Run one topology on this machine or a cluster."
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start a topology and supervise it until the trainer ends")
    run.add_argument("topology", type=Path, help="the topology YAML (see configs/launch/)")
    run.add_argument("--backend", choices=["local", "ray", "slurm"], default="local")
    run.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="--backend ray: the existing cluster's head (default: RAY_ADDRESS)",
    )
    run.add_argument(
        "--out", type=Path, default=None, help="run directory (default runs/launch/NAME)"
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print what would run where; start nothing"
    )
    run.add_argument(
        "--resume", action="store_true", help="continue the run in --out (API and trainer resume)"
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a topology value, e.g. trainer.flags.training_steps=3 (repeatable)",
    )
    st = sub.add_parser("status", help="show every component of a run")
    st.add_argument("dir", type=Path)
    sp = sub.add_parser("stop", help="stop a run: trainer, envs, inference, API last")
    sp.add_argument("dir", type=Path)
    return p


def apply_override(data: dict[str, Any], text: str) -> None:
    """``a.b.0.c=V`` sets ``data["a"]["b"][0]["c"] = yaml(V)``; raises ``ConfigError``."""
    key, eq, raw = text.partition("=")
    if not eq or not key:
        raise ConfigError(
            f"--set {text!r}: expected KEY=VALUE (e.g. trainer.flags.training_steps=3)"
        )
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(
                    f"--set {key}: {part!r} is not an index of a {len(node)}-item list"
                )
            if last:
                node[int(part)] = yaml.safe_load(raw)
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = yaml.safe_load(raw)
            else:
                node = node.setdefault(part, {})
        else:
            raise ConfigError(f"--set {key}: {'.'.join(parts[:i])} is not a section")


def _run(args: argparse.Namespace) -> int:
    from atroposlib.launch.plan import build_plan
    from atroposlib.launch.state import launcher_alive, read_state, state_path
    from atroposlib.launch.topology import parse_topology

    data = load_yaml_mapping(args.topology, flag="topology")
    for text in args.set:
        apply_override(data, text)
    topo = parse_topology(data, source=str(args.topology))
    out = (args.out or Path("runs") / "launch" / topo.name).resolve()
    if args.backend == "slurm" and not args.dry_run and shutil.which("sbatch") is None:
        raise ConfigError("--backend slurm: sbatch is not on PATH (is this a SLURM login node?)")
    address = ""
    if args.backend == "ray" and not args.dry_run:
        from atroposlib.launch.ray_connect import import_ray, probe, resolve_address

        import_ray()
        address = resolve_address(args.ray_address)
        probe(address)
    if not args.dry_run and state_path(out).exists():
        pid = launcher_alive(read_state(out))
        if pid is not None:
            raise ConfigError(
                f"{out} is in use by a running launcher (pid {pid}): {PROG} stop {out}"
            )
        if not args.resume:
            raise ConfigError(
                f"{out} holds an earlier run: pass --resume to continue it or choose another --out"
            )
    if args.resume and not args.dry_run and not state_path(out).exists():
        raise ConfigError(f"--resume: {out} holds no earlier run")
    plan = build_plan(
        topo, out, args.backend, topology_dir=args.topology.parent, resume=args.resume
    )
    if args.dry_run:
        from atroposlib.launch.describe import describe_plan

        if args.backend == "slurm":
            from atroposlib.launch.slurm import render_sbatch

            print(render_sbatch(plan, str(args.topology.resolve())))
        else:
            print(describe_plan(plan))
        return 0
    if args.backend == "slurm":
        from atroposlib.launch.slurm import submit

        code = submit(plan, topology_path=str(args.topology.resolve()))
        _warn_open_api(topo, args.backend)
        return code
    runner: Any
    if args.backend == "ray":
        runner = _ray_runner(plan, address, str(args.topology.resolve()))
    else:
        from atroposlib.launch.local import LocalRun

        runner = LocalRun(plan, topology_path=str(args.topology.resolve()), say=_say)
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"[launch] {topo.name}: run directory {out} (logs/, metrics.jsonl, {PROG} status {out})",
        flush=True,
    )
    _warn_open_api(topo, args.backend)
    code = runner.run(on_tick=_progress())
    if code == 0:
        print(f"[launch] finished: metrics at {out / 'metrics.jsonl'}", flush=True)
    return code


def _warn_open_api(topo: Any, backend: str) -> None:
    """One line when the API will listen on a node address with no token (cluster backends)."""
    if backend == "local" or topo.cluster.loopback:
        return
    if topo.env.get("ATROPOS_API_TOKEN") or topo.api.flags.get("api_token"):
        return
    print(
        "[launch] warning: the API listens on a node address without a token: anyone who can reach "
        "it can read and reset the run (--set env.ATROPOS_API_TOKEN=SECRET gives the API, the env "
        "workers and the trainer one)",
        flush=True,
    )


def _ray_runner(plan: Any, address: str, topology_path: str) -> Any:
    """Join the Ray cluster at ``address`` and check it can hold ``plan`` (a ``ConfigError`` and
    nothing started when not); the runner."""
    import hashlib

    from atroposlib.launch.ray_backend import RayRun
    from atroposlib.launch.ray_connect import check_cluster, connect

    tag = hashlib.sha1(str(plan.out).encode()).hexdigest()[:8]
    namespace = f"atropos-{plan.topology.name}-{tag}"
    ray = connect(address, namespace)
    try:
        check_cluster(ray, plan, address)
    except ConfigError:
        ray.shutdown()
        raise
    print(f"[launch] joined the Ray cluster at {address} (namespace {namespace})", flush=True)
    return RayRun(
        plan, ray, address=address, namespace=namespace, topology_path=topology_path, say=_say
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr if line.startswith(PROG) else sys.stdout, flush=True)


def _progress() -> Any:
    """A tick callback printing the trainer's latest step at most every 10 s."""
    last: dict[str, Any] = {"t": 0.0, "step": -1}

    def tick(runner: Any) -> None:
        now = time.monotonic()
        if now - last["t"] < 10:
            return
        from atroposlib.launch.metrics import last_step

        row = last_step(runner.out / "metrics.jsonl")
        if row is not None and row.get("step") != last["step"]:
            last["t"], last["step"] = now, row.get("step")
            print(
                f"[launch] trainer step {row.get('step')}  reward {row.get('reward_mean')}",
                flush=True,
            )

    return tick


def _status(args: argparse.Namespace) -> int:
    from atroposlib.launch.describe import describe_state
    from atroposlib.launch.state import launcher_alive, read_state
    from atroposlib.utils.procs import pid_alive

    state = read_state(args.dir)
    live = launcher_alive(state)
    if state.get("state") in ("starting", "running", "stopping") and live is None:
        state["state"] = f"{state['state']}, launcher gone"
    failed = args.dir / ".failed" / "message"  # a SLURM job's one error line
    if state.get("backend") == "slurm" and failed.is_file():
        state["state"] = "failed"
        state["message"] = failed.read_text().strip().removeprefix(f"{PROG}: error: ")
    here = socket.gethostname()
    for c in state["components"]:
        if c.get("host", here) != here:
            continue  # a Ray component on another node: its actor reported its state
        if c.get("state") in ("running", "starting") and c.get("pid") and not pid_alive(c["pid"]):
            c["state"] = "gone"
    print(describe_state(state))
    return 0


def _stop(args: argparse.Namespace) -> int:
    import os
    import signal

    from atroposlib.launch.state import launcher_alive, read_state
    from atroposlib.utils.procs import group_members, stop_groups

    state = read_state(args.dir)
    if state.get("backend") == "slurm":  # the batch script's trap stops the steps in order
        job = str(state.get("job_id"))
        scancel = shutil.which("scancel")
        if scancel is None:
            return fail(PROG, f"scancel is not on PATH: cannot stop SLURM job {job}")
        done = subprocess.run(
            [scancel, "--batch", "-s", "TERM", job], capture_output=True, text=True
        )
        if done.returncode != 0:
            return fail(PROG, f"scancel {job}: {done.stderr.strip() or 'failed'}", code=1)
        print(f"[launch] sent SIGTERM to job {job}: it stops trainer, envs, inference, API last")
        return 0
    pid = launcher_alive(state)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)  # the launcher stops its components in order
        deadline = time.monotonic() + 120
        while launcher_alive(state) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    # whatever is left (the launcher was killed, or did not finish in time), in stop order; on Ray
    # the cluster ends a dead launcher's actors and their processes itself, so only this host's
    here = socket.gethostname()
    comps = [c for c in state["components"] if c.get("host", here) == here]
    for role in ("trainer", "env", "inference", "api", "prepare"):
        pids = [c["pid"] for c in comps if c.get("role") == role and c.get("pid")]
        stop_groups([p for p in pids if group_members(p)], 15)
    left = [c["name"] for c in comps if c.get("pid") and group_members(c["pid"])]
    if left:
        return fail(PROG, f"could not stop {', '.join(left)}", code=1)
    print(f"[launch] stopped {args.dir}: nothing left running")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "status":
            return _status(args)
        return _stop(args)
    except ConfigError as e:
        return fail(PROG, e)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

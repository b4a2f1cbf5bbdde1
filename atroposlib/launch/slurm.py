"""The SLURM backend: a plan rendered as one sbatch job and submitted.

One allocation of ``cluster.nodes`` nodes (heterogeneous jobs never start on a single node); inside it
every component is an ``srun --overlap`` step on the node the plan placed it on, the node names resolved
in the job with ``scontrol show hostnames``. Start order API -> inference (each waits for /health) ->
env workers -> trainer; env workers and inference servers run in a restart loop with doubling backoff
(more than ``max_restarts`` crashes inside ``window_minutes`` stops the job); the trainer's exit ends the
job with its status, and every step is stopped in the order trainer, envs, inference, API.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time

from atroposlib.errors import ConfigError
from atroposlib.launch.plan import Component, Plan
from atroposlib.launch.spawn import package_root
from atroposlib.launch.state import write_state

_HEALTH = (
    "import sys, time, urllib.request\n"
    "url, limit = sys.argv[1], float(sys.argv[2]); end = time.time() + limit\n"
    "while time.time() < end:\n"
    "    try:\n"
    "        urllib.request.urlopen(url, timeout=2); sys.exit(0)\n"
    "    except Exception:\n"
    "        time.sleep(1)\n"
    "sys.exit(1)\n"
)


def shell_arg(arg: str) -> str:
    """``arg`` quoted for bash, with ``@NODEk@`` turned into the job's ``$HOSTk`` (node k's address)."""
    quoted = shlex.quote(arg)
    if "@NODE" not in quoted:
        return quoted
    inside = quoted.startswith("'")
    for k in range(64):
        var = f'"$HOST{k}"'
        quoted = quoted.replace(f"@NODE{k}@", f"'{var}'" if inside else var)
    return quoted


def _cmd(argv: list[str]) -> str:
    return " ".join(shell_arg(a) for a in argv)


def _srun(plan: Plan, c: Component) -> str:
    nodes = ",".join(f"$NODE{k}" for k in c.nodes)
    parts = ["srun", "--overlap", f"--job-name={c.name}", f"--nodes={len(c.nodes)}"]
    # one task per node of the step (not the job's SLURM_NTASKS, which counts every node)
    parts += [f"--ntasks={len(c.nodes)}", "--ntasks-per-node=1"]
    parts += [
        f'--nodelist="{nodes}"',
        f"--output={shell_arg(str(plan.out / c.log))}",
        "--open-mode=append",
    ]
    if len(c.nodes) > 1:
        parts.append("--label")
    head = ["env", *(f"{k}={v}" for k, v in c.env.items())] if c.env else []
    return " ".join(parts) + " " + _cmd(head + c.argv)


def _node_watch(plan: Plan, topology_path: str) -> list[str]:
    """Script lines of a multi-node job: which node is lost, and the one line that says so."""
    on_node = [
        ", ".join(
            c.name
            for c in plan.components
            if k in c.nodes and not c.external and c.role != "prepare"
        )
        or "nothing"
        for k in range(plan.nodes)
    ]
    resume = " ".join(
        shlex.quote(a)
        for a in ("atropos-launch", "run", topology_path or "TOPOLOGY", "--backend", "slurm")
    )
    resume += f" --out {shell_arg(str(plan.out))} --resume"
    return [
        "HOSTS=(" + " ".join(f'"$HOST{k}"' for k in range(plan.nodes)) + ")",
        f"ON_NODE=({' '.join(shlex.quote(n) for n in on_node)})",
        "SLURMD_PORT=$(scontrol show config 2>/dev/null | awk '$1 == \"SlurmdPort\" {print $3}')",
        "node_lost() {  # the index of a node of the job that is lost (SLURM marks it down, or its",
        "  local k state  # slurmd does not answer), else false",
        '  for k in "${!NODES[@]}"; do',
        """    state=$(scontrol show node "${NODES[$k]}" 2>/dev/null | grep -o 'State=[^ ]*' | cut -d= -f2)""",
        """    case "$state" in *DOWN*|*FAIL*|*NOT_RESPONDING*|*'*'*) echo "$k"; return 0 ;; esac""",
        '    if [ -n "$SLURMD_PORT" ] && ! timeout 3 bash -c ": </dev/tcp/${HOSTS[$k]}/$SLURMD_PORT" 2>/dev/null; then',
        '      echo "$k"; return 0',
        "    fi",
        "  done",
        "  return 1",
        "}",
        "report_node_loss() {  # K",
        '  fail_once "atropos-launch: error: node ${NODES[$1]} (${HOSTS[$1]}) was lost: ${ON_NODE[$1]} '
        f'ran there; nothing was re-placed; when it is back, continue with: {resume}"',
        "}",
    ]


def render_sbatch(plan: Plan, topology_path: str = "") -> str:
    """The whole sbatch script for ``plan`` (``--dry-run`` prints it)."""
    lines = [
        *_sbatch_header(plan),
        *_job_environment(plan),
        *_job_functions(plan, topology_path),
        *_component_steps(plan),
        *_job_end(plan),
    ]
    return "\n".join(lines) + "\n"


def _sbatch_header(plan: Plan) -> list[str]:
    """The ``#SBATCH`` lines of the allocation, then a comment listing where each component runs."""
    topo, cl = plan.topology, plan.topology.cluster
    lines = ["#!/bin/bash", f"#SBATCH --job-name={topo.name}", f"#SBATCH --nodes={plan.nodes}"]
    lines.append("#SBATCH --ntasks-per-node=1")
    if (
        plan.nodes > 1
    ):  # a lost node does not end the job: the script says which node and stops in order
        lines.append("#SBATCH --no-kill")
    if cl.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={cl.gpus_per_node}")
    if cl.cpus_per_node:
        lines.append(f"#SBATCH --cpus-per-task={cl.cpus_per_node}")
    for key in ("partition", "account", "time"):
        value = getattr(cl, key)
        if value:
            lines.append(f"#SBATCH --{key}={value}")
    lines += [f"#SBATCH {extra}" for extra in cl.sbatch]
    lines.append(f"#SBATCH --output={plan.out}/logs/sbatch-%j.log")
    lines.append(f"# {topo.name}: generated by atropos-launch; components and nodes:")
    lines += [
        f"#   {c.name}: node(s) {','.join(map(str, c.nodes)) or '-'}"
        + (f", GPUs {','.join(map(str, c.gpus))}" if c.gpus else "")
        + (f", {_comment_url(c.url)}" if c.url else "")
        for c in plan.components
    ]
    return lines


def _job_environment(plan: Plan) -> list[str]:
    """The job's set-up: the topology's environment, the node names and addresses (``$NODEk``,
    ``$HOSTk``), the run directory and the Python every step runs."""
    topo = plan.topology
    return [
        "set -u",
        *topo.cluster.setup,
        *(f"export {k}={shell_arg(v)}" for k, v in topo.env.items()),
        f"export PYTHONPATH={shell_arg(package_root())}${{PYTHONPATH:+:$PYTHONPATH}}",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        *(f'NODE{k}="${{NODES[{k}]}}"' for k in range(plan.nodes)),
        "node_addr() {  # NODE: the address SLURM reaches it at (its NodeAddr), else its name",
        "  local a",
        """  a=$(scontrol show node "$1" 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)""",
        '  echo "${a:-$1}"',
        "}",
        *(
            ["HOST0=127.0.0.1  # cluster.loopback: everything on this host's loopback"]
            if topo.cluster.loopback
            else [f'HOST{k}=$(node_addr "$NODE{k}")' for k in range(plan.nodes)]
        ),
        f"OUT={shell_arg(str(plan.out))}",
        'mkdir -p "$OUT/logs"; rm -rf "$OUT/.stopping" "$OUT/.failed"',
        f'ln -sfn {shell_arg(str(plan.metrics_source))} "$OUT/metrics.jsonl"  # the trainer\'s metrics',
        f"PY={shell_arg(sys.executable)}",
    ]


def _job_functions(plan: Plan, topology_path: str) -> list[str]:
    """The script's shell functions: health waits, the one error line, the node watch of a multi-node
    job, the restart loop, and stopping in order (trainer, env workers, inference servers, API)."""
    return [
        "health() {  # URL SECONDS: wait until it answers",
        f'  "$PY" -c {shell_arg(_HEALTH)} "$1" "$2"',
        "}",
        "fail_once() {  # LINE: the run's one error line (the first caller wins; DIR/.failed/message)",
        '  if mkdir "$OUT/.failed" 2>/dev/null; then echo "$1" >&2; echo "$1" > "$OUT/.failed/message"; fi',
        "}",
        *(_node_watch(plan, topology_path) if plan.nodes > 1 else []),
        *_supervise_function(plan),
        "declare -A PIDS",
        "stop_one() {  # NAME: SIGTERM to the tasks of its step (a signalled step launcher cancels them), then wait",
        "  local pid=${PIDS[$1]} t=0",
        '  for id in $(squeue -h -s -j "$SLURM_JOB_ID" -o "%i %j" | awk -v n="$1" \'$2 == n {print $1}\'); do',
        '    scancel -s TERM "$id" 2>/dev/null',
        "  done",
        f'  while kill -0 "$pid" 2>/dev/null && (( t < {int(plan.topology.supervision.stop_timeout_s * 5)} )); do sleep 0.2; t=$((t + 1)); done',
        '  pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null',
        "}",
        "stop_all() {  # trainer, env workers, inference servers, API last",
        '  touch "$OUT/.stopping"',
        "  for role in trainer env inference api; do",
        '    for name in "${!PIDS[@]}"; do',
        '      [[ $name == $role* ]] && stop_one "$name"',
        "    done",
        "  done",
        "  wait",
        "}",
        """trap 'stop_all; [ -e "$OUT/.failed" ] && exit 1; exit 143' TERM INT""",
    ]


def _supervise_function(plan: Plan) -> list[str]:
    """``supervise NAME COMMAND...``: the restart loop of env workers and inference servers, with the
    topology's backoff and crash limit (and, in a multi-node job, the lost node named)."""
    sup = plan.topology.supervision
    return [
        "supervise() {  # NAME COMMAND...: restart on a crash, doubling the delay",
        f"  local name=$1 n=0 delay={sup.backoff_s:g} last=$SECONDS; shift",
        '  until "$@"; do',
        '    [ -e "$OUT/.stopping" ] && return 0',
        *(
            ['    if k=$(node_lost); then report_node_loss "$k"; kill -TERM $$; return 1; fi']
            if plan.nodes > 1
            else []
        ),
        f"    if (( SECONDS - last > {int(sup.window_minutes * 60)} )); then n=0; fi",
        "    n=$((n + 1)); last=$SECONDS",
        f"    if (( n > {sup.max_restarts} )); then",
        f'      fail_once "atropos-launch: error: $name crashed $n times in {sup.window_minutes:g} min; see $OUT/logs/$name.log"',
        "      kill -TERM $$; return 1",
        "    fi",
        '    echo "[launch] $name crashed; restarting in ${delay}s" >&2',
        f'    sleep "$delay"; delay=$(awk -v d="$delay" \'BEGIN {{ d *= 2; print (d > {sup.max_backoff_s:g} ? {sup.max_backoff_s:g} : d) }}\')',
        "  done",
        "}",
    ]


def _component_steps(plan: Plan) -> list[str]:
    """One ``srun`` step per component in start order: prepare steps run to the end, the others in
    the background (under ``supervise`` when they restart), servers waited for until they answer."""
    lines: list[str] = []
    for c in plan.components:
        if c.external:
            continue
        if c.role == "prepare":
            cond = f"[ -e {shell_arg(c.creates)} ] || " if c.creates else ""
            lines.append(
                f"{cond}{_srun(plan, c)} || {{ echo 'atropos-launch: error: {c.name} failed; see {plan.out / c.log}' >&2; exit 1; }}"
            )
            continue
        run = _srun(plan, c)
        if c.restart:
            run = f"supervise {c.name} {run}"
        lines.append(f"{run} &")
        lines.append(f"PIDS[{c.name}]=$!")
        if c.health:
            lines.append(
                f"health {shell_arg(c.health)} {c.startup_timeout:.0f} || "
                f"{{ echo 'atropos-launch: error: {c.name} did not answer; see {plan.out / c.log}' >&2; stop_all; exit 1; }}"
            )
    return lines


def _job_end(plan: Plan) -> list[str]:
    """The trainer's exit ends the job with its status (a lost node named first), everything stopped."""
    return [
        'wait "${PIDS[trainer]}"; rc=$?',
        *(
            ['if [ $rc -ne 0 ] && k=$(node_lost); then report_node_loss "$k"; stop_all; exit 1; fi']
            if plan.nodes > 1
            else []
        ),
        f'[ $rc -ne 0 ] && fail_once "atropos-launch: error: the trainer exited with code $rc; see {plan.out / "logs" / "trainer.log"}"',
        "stop_all",
        "exit $rc",
    ]


def _comment_url(url: str) -> str:
    for k in range(64):
        url = url.replace(f"@NODE{k}@", f"$HOST{k}")
    return url


def cluster_nodes(partition: str | None = None) -> int | None:
    """How many nodes the cluster (or ``partition``) has, from ``sinfo``; None when it cannot say."""
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return None
    argv = [sinfo, "-h", "-N", "-o", "%N", *(["-p", partition] if partition else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = set(done.stdout.split())
    return len(names) if done.returncode == 0 and names else None


def submit(plan: Plan, *, topology_path: str = "") -> int:
    """Write ``DIR/launch.sbatch``, submit it with ``sbatch --parsable`` and record the job id."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise ConfigError("--backend slurm: sbatch is not on PATH (is this a SLURM login node?)")
    partition = plan.topology.cluster.partition
    have = cluster_nodes(partition)
    if have is not None and plan.nodes > have:
        where = f"partition {partition}" if partition else "SLURM cluster"
        raise ConfigError(
            f"the topology asks for {plan.nodes} nodes (cluster.nodes) but the {where} has {have}"
        )
    (plan.out / "logs").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(plan.out / ".failed", ignore_errors=True)  # an earlier job's error line
    script = plan.out / "launch.sbatch"
    script.write_text(render_sbatch(plan, topology_path))
    done = subprocess.run([sbatch, "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"sbatch refused the job: {msg}")
    job = done.stdout.strip().split(";")[0]
    write_state(
        plan.out,
        {
            "version": 1,
            "backend": "slurm",
            "topology": topology_path,
            "job_id": job,
            "submitted": time.time(),
            "state": "submitted",
            "message": f"job {job}; squeue -j {job}",
            "metrics": str(plan.out / "metrics.jsonl"),
            "components": [
                {
                    "name": c.name,
                    "role": c.role,
                    "where": ",".join(f"node{k}" for k in c.nodes) or "external",
                    "state": "in job " + job,
                    "restarts": 0,
                    "url": c.url,
                    "log": str(plan.out / c.log),
                    "pid": None,
                }
                for c in plan.components
            ],
        },
    )
    print(f"[launch] submitted job {job}: {script}; logs under {plan.out / 'logs'}")
    return 0


__all__ = ["render_sbatch", "shell_arg", "submit"]

"""SLURM across two real hosts: ``slurmctld`` and a ``slurmd`` on ``host1`` (10.231.0.1), a second
``slurmd`` on ``host2`` (10.231.0.2), each host a network namespace (``tests/hosts.py``) whose name
resolves to 127.0.1.1 on itself and not at all on the other. A 2-node job runs the CPU topology of
``configs/launch/ray_cpu.yaml`` (an engine and an env worker on each node, the API on node 0, a 2-node
gloo trainer: one srun step over both nodes). Mid-run, host2's ``slurmd`` and every step on it are
SIGKILLed: the job ends with one line naming the node, its address and the components that ran there,
0 groups are lost, and once host2's ``slurmd`` is back, ``--resume`` finishes the run with each step
once in ``metrics.jsonl`` and every acknowledged batch in the model. Skips with the reason where SLURM
or namespaces are unavailable (``scripts/setup_slurm.sh``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.hosts import Host, Hosts, make_hosts
from tests.jsonl import read_jsonl
from tests.launch.run_checks import group_accounting

REPO = Path(__file__).resolve().parents[2]
DAEMONS = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo")
# two SLURM jobs of 7 components on two hosts: 4 min measured on 2 cores at load 15-25
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")


def _config(d: Path, hosts: Hosts) -> str:
    head = hosts.hosts[0]
    nodes = [f"NodeName={h.name} NodeAddr={h.addr} CPUs=2 RealMemory=8000" for h in hosts.hosts]
    return "\n".join(
        [
            "ClusterName=atroposhosts",
            f"SlurmctldHost={head.name}({head.addr})",
            "SlurmctldPort=6817",
            "SlurmdPort=6818",
            "AuthType=auth/none",
            "CredType=cred/none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SlurmdTimeout=20",  # a node whose slurmd is gone is DOWN after 20 s (default 300)
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool-%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd-%n.log",
            "SlurmUser=root",
            "SlurmdUser=root",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            *nodes,
            f"PartitionName=launch Nodes={','.join(h.name for h in hosts.hosts)} Default=YES "
            "MaxTime=INFINITE State=UP",
            "",
        ]
    )


class Slurm:
    def __init__(self, hosts: Hosts, d: Path) -> None:
        self.hosts, self.d = hosts, d
        self.head, self.node_b = hosts.hosts
        self.conf = d / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PYTHONPATH=str(REPO))

    def daemon(self, host: Host, name: str, *args: str) -> subprocess.Popen:
        argv = [shutil.which(name) or name, "-D", "-f", str(self.conf), *args]
        log = open(self.d / f"{name}-{host.name}.out", "ab")
        return host.popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log)

    def slurmd(self, host: Host) -> subprocess.Popen:
        (self.d / f"spool-{host.name}").mkdir(exist_ok=True)
        return self.daemon(host, "slurmd", "-N", host.name)

    def run(self, *argv: str) -> str:
        return self.head.run(list(argv), env=self.env, capture_output=True, text=True).stdout

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T")
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.node_states()
            if len(states) == 2 and set(states.values()) == {"idle"}:
                return
            time.sleep(0.5)
        logs = "".join(p.read_text(errors="replace")[-400:] for p in self.d.glob("*.out"))
        raise AssertionError(f"SLURM nodes not idle within {timeout}s: {self.node_states()} {logs}")

    def job(self, job: str) -> tuple[str, str]:
        out = self.run("scontrol", "show", "job", job)
        state = re.search(r"JobState=(\S+)", out)
        code = re.search(r"ExitCode=(\S+)", out)
        return (state.group(1) if state else "?", code.group(1) if code else "?")

    def wait_job(self, job: str, timeout: float) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        state = ("?", "?")
        while time.monotonic() < deadline:
            state = self.job(job)
            if state[0] in DONE:
                break
            time.sleep(1)
        return state


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[Slurm]:
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed ({', '.join(missing)} missing): scripts/setup_slurm.sh"
        )
    with make_hosts(2, tag="slurm", own_name_loopback=True, resolve_others=False) as hosts:
        d = tmp_path_factory.mktemp("slurmhosts")
        (d / "state").mkdir()
        s = Slurm(hosts, d)
        s.conf.write_text(_config(d, hosts))
        s.daemon(s.head, "slurmctld")
        s.slurmd(s.head)
        s.slurmd(s.node_b)
        try:
            s.wait_idle(60)
        except AssertionError as e:
            pytest.skip(f"the two-host SLURM cluster did not come up: {e}")
        yield s


@pytest.fixture(scope="module")
def topology(slurm: Slurm, tmp_path_factory) -> Path:
    model = tmp_path_factory.mktemp("model")
    subprocess.run(
        [sys.executable, "-m", "demo.tiny_model", str(model), "--warmup-sft-steps", "5"],
        cwd=REPO,
        env=slurm.env,
        check=True,
        capture_output=True,
    )
    data = yaml.safe_load((REPO / "configs" / "launch" / "ray_cpu.yaml").read_text())
    warm = str(model / "warm")
    data["prepare"] = []
    data["cluster"] = {"nodes": 2}
    for g in data["inference"]:
        g["model"] = warm
    for e in data["envs"]:
        e["flags"]["env"]["tokenizer_name"] = warm
    data["trainer"]["flags"]["model_name"] = warm
    data["trainer"]["flags"]["training_steps"] = 6
    data["supervision"] = {"backoff_s": 0.5, "max_restarts": 3, "stop_timeout_s": 10}
    path = tmp_path_factory.mktemp("topo") / "slurm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _submit(slurm: Slurm, topology: Path, run: Path, *extra: str) -> str:
    argv = [sys.executable, "-m", "atroposlib.cli.launch", "run", str(topology)]
    argv += ["--backend", "slurm", "--out", str(run), *extra]
    done = slurm.head.run(argv, cwd=REPO, env=slurm.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads((run / "launch-state.json").read_text())["job_id"])


def _steps(run: Path) -> list[int]:
    return [row["step"] for row in read_jsonl(run / "metrics.jsonl")]


def _log(run: Path, job: str) -> str:
    path = run / "logs" / f"sbatch-{job}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _tail(path: Path, chars: int = 4000) -> str:
    """The end of a component's log, for a failure message (the launcher's line points at it)."""
    return f"\n--- {path.name} ---\n" + (
        path.read_text(errors="replace")[-chars:] if path.exists() else "(none)"
    )


def test_a_lost_slurm_node_ends_the_job_in_one_line_and_resume_loses_nothing(
    tmp_path, slurm, topology
):
    run = tmp_path / "run"
    job = _submit(slurm, topology, run)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(_steps(run)) < 2:
        assert slurm.job(job)[0] not in DONE, _log(run, job)
        time.sleep(0.5)
    assert len(_steps(run)) >= 2, _log(run, job)[-3000:]
    node1 = (run / "logs" / "trainer.log").read_text()
    assert "[node_net] host2: 10.231.0.2 on eth0 (GLOO_SOCKET_IFNAME=eth0, " in node1
    assert "torchrun --local-addr 10.231.0.2" in node1
    killed_at = time.monotonic()
    slurm.node_b.signal_all(signal.SIGKILL)  # host2's slurmd, slurmstepd and every task on it
    state = slurm.wait_job(job, 180)
    took = time.monotonic() - killed_at
    log = _log(run, job)
    assert state == ("FAILED", "1:0"), (state, log[-3000:])
    errors = [line for line in log.splitlines() if line.startswith("atropos-launch: error:")]
    hint = f"atropos-launch run {topology} --backend slurm --out {run} --resume"
    assert errors == [
        "atropos-launch: error: node host2 (10.231.0.2) was lost: inference-b-0, env-arith-b-0, "
        f"trainer ran there; nothing was re-placed; when it is back, continue with: {hint}"
    ], log[-3000:]
    print(f"SLURM node loss reported {took:.1f} s after SIGKILL")  # docs/scale.md quotes it
    status = slurm.head.run(
        [sys.executable, "-m", "atroposlib.cli.launch", "status", str(run)],
        cwd=REPO,
        env=slurm.env,
        capture_output=True,
        text=True,
    )
    assert errors[0].removeprefix("atropos-launch: error: ") in status.stdout
    counts = group_accounting(run)
    assert counts["lost"] == 0 and counts["other"] == 0, counts

    slurm.slurmd(slurm.node_b)  # the node comes back
    slurm.wait_idle(90)
    job = _submit(slurm, topology, run, "--resume")
    state = slurm.wait_job(job, 360)
    log = _log(run, job)
    assert state == ("COMPLETED", "0:0"), log[-3000:] + _tail(run / "logs" / "trainer.log")
    assert _steps(run) == list(range(1, 7))  # each step once
    trainer_log = (run / "logs" / "trainer.log").read_text()
    assert "resumed from" in trainer_log and "are not in the model" not in trainer_log
    ckpt = (run / "trainer" / "checkpoints" / "latest").read_text().strip()
    db = sqlite3.connect(run / "api-data" / "trajectories.sqlite3")
    try:
        acked = db.execute("SELECT count(*) FROM batches WHERE acked = 1").fetchone()[0]
    finally:
        db.close()
    assert ckpt == "step_0000006" and acked == 6  # every acknowledged batch is in the final model
    counts = group_accounting(run)
    assert counts["lost"] == 0 and counts["other"] == 0 and counts["spooled"] == 0, counts
    assert counts["pending"] == 0 and counts["served"] == counts["served_in_batches"] > 0, counts


def test_a_topology_asking_for_more_nodes_than_the_cluster_has_is_one_line(
    tmp_path, slurm, topology
):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "atroposlib.cli.launch", "run", str(topology)]
    argv += ["--backend", "slurm", "--out", str(run), "--set", "cluster.nodes=3"]
    done = slurm.head.run(argv, cwd=REPO, env=slurm.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "atropos-launch: error: the topology asks for 3 nodes (cluster.nodes) but the SLURM cluster "
        "has 2"
    ]
    assert not slurm.run("squeue", "-h", "-o", "%i").split()  # nothing submitted

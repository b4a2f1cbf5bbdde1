"""SLURM tier: the shipped CPU demo topology submitted as one real SLURM job (slurmctld and slurmd on
loopback, started here with a temporary config and stopped by pid), run to completion, its components
stopped gracefully and nothing left behind. Skips with the reason when SLURM is not installed
(``scripts/setup_slurm.sh`` installs it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atroposlib.utils.net import free_port
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "launch" / "demo_cpu.yaml"
DAEMONS = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue")


def _config(d: Path) -> str:
    host = socket.gethostname().split(".")[0]
    return "\n".join(
        [
            "ClusterName=atroposlaunch",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/none",
            "CredType=cred/none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd.log",
            "SlurmUser=root",
            "SlurmdUser=root",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=20000 State=UNKNOWN",
            f"PartitionName=launch Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[dict[str, str]]:
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed ({', '.join(missing)} missing): scripts/setup_slurm.sh"
        )
    if os.geteuid() != 0:
        pytest.skip("the one-host SLURM test cluster runs its daemons as root")
    d = tmp_path_factory.mktemp("slurm")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    conf = d / "slurm.conf"
    conf.write_text(_config(d))
    env = dict(os.environ, SLURM_CONF=str(conf))
    procs = [
        subprocess.Popen(
            [shutil.which(n) or n, "-D", "-f", str(conf)],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=open(d / f"{n}.out", "wb"),
        )
        for n in ("slurmctld", "slurmd")
    ]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True
            ).stdout
            if out.strip() == "idle":
                break
            time.sleep(0.3)
        else:
            pytest.skip(
                f"the SLURM test cluster did not come up: {(d / 'slurmd.out').read_text()[-300:]}"
            )
        yield env
    finally:
        for p in reversed(procs):  # our own daemons, by pid
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def _job_state(env: dict[str, str], job: str) -> tuple[str, str]:
    out = subprocess.run(
        ["scontrol", "show", "job", job], env=env, capture_output=True, text=True
    ).stdout
    state = re.search(r"JobState=(\S+)", out)
    code = re.search(r"ExitCode=(\S+)", out)
    return (state.group(1) if state else "?", code.group(1) if code else "?")


def _ours_running(run: Path) -> list[str]:
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if str(run) in cmd and state != "Z":
                left.append(cmd)
    return left


def test_the_cpu_demo_topology_runs_as_one_slurm_job(tmp_path, slurm):
    run = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.launch",
        "run",
        str(DEMO),
        "--backend",
        "slurm",
        "--out",
        str(run),
        "--set",
        "cluster.loopback=true",
        "--set",
        f"api.port={free_port()}",
        "--set",
        f"inference.0.port={free_port()}",
        "--set",
        "prepare.0.argv.5=5",
        "--set",
        "trainer.flags.training_steps=3",
        "--set",
        "trainer.flags.batch_size=8",
        "--set",
        "envs.0.flags.env.group_size=4",
        "--set",
        "envs.0.flags.env.max_num_workers=2",
    ]
    env = dict(slurm, PYTHONPATH=str(REPO))
    sub = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    job = json.loads((run / "launch-state.json").read_text())["job_id"]
    deadline = time.monotonic() + 170
    state = ("?", "?")
    while time.monotonic() < deadline:
        state = _job_state(slurm, job)
        if state[0] in (
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ):
            break
        time.sleep(1)
    log = (
        (run / "logs" / f"sbatch-{job}.log").read_text()
        if (run / "logs" / f"sbatch-{job}.log").exists()
        else ""
    )
    assert state == ("COMPLETED", "0:0"), log
    assert [row["step"] for row in read_jsonl(run / "metrics.jsonl")] == [
        1,
        2,
        3,
    ]
    # stopped by SIGTERM to its step, not cancelled: the env worker finished its in-flight groups
    assert "received SIGTERM" in (run / "logs" / "env-arithmetic-0.log").read_text()
    assert "Application shutdown complete" in (run / "logs" / "api.log").read_text()
    assert not _ours_running(run)
    status = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.launch", "status", str(run)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0 and f"job {job}" in status.stdout


def test_stop_ends_a_slurm_job_in_order_and_leaves_nothing(tmp_path, slurm):
    run = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "atroposlib.cli.launch",
        "run",
        str(DEMO),
        "--backend",
        "slurm",
        "--out",
        str(run),
        "--set",
        "cluster.loopback=true",
        "--set",
        f"api.port={free_port()}",
        "--set",
        f"inference.0.port={free_port()}",
        "--set",
        "prepare.0.argv.5=5",
        "--set",
        "trainer.flags.training_steps=1000",
        "--set",
        "trainer.flags.batch_size=8",
        "--set",
        "envs.0.flags.env.group_size=4",
    ]
    env = dict(slurm, PYTHONPATH=str(REPO))
    assert subprocess.run(argv, cwd=REPO, env=env, capture_output=True, timeout=60).returncode == 0
    job = json.loads((run / "launch-state.json").read_text())["job_id"]
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and not (run / "metrics.jsonl").exists():
        time.sleep(0.5)
    assert (run / "metrics.jsonl").exists(), "the trainer never reached a step"
    stop = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.launch", "stop", str(run)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0 and f"sent SIGTERM to job {job}" in stop.stdout
    while time.monotonic() < deadline and _job_state(slurm, job)[0] in (
        "RUNNING",
        "COMPLETING",
        "PENDING",
    ):
        time.sleep(0.5)
    assert _job_state(slurm, job)[0] not in ("RUNNING", "COMPLETING", "PENDING")
    assert "received SIGTERM" in (run / "logs" / "env-arithmetic-0.log").read_text()
    assert not _ours_running(run)

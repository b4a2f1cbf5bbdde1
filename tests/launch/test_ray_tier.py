"""Ray tier: a real Ray cluster (a head on loopback, started here and stopped by pid) runs a CPU
topology through ``atropos-launch --backend ray``: two engine servers and two env workers pinned to
two "nodes" (custom resources node_a and node_b on the one host: a second raylet on one host is refused
when Ray keeps to loopback), and a 2-rank gloo trainer (2 nodes x 1 process) meeting through torchrun's
c10d rendezvous. One env worker and one engine are SIGKILLed mid-run: both are restarted by their
actors, the run finishes and no group is lost. Also: ``stop`` leaves nothing running, and the bad-input
refusals (an address where nothing answers, GPUs the cluster lacks) are one line, exit 2, nothing
started. Skips with the reason where the Ray environment (``scripts/setup_ray.sh``) is missing. Where
network namespaces can be made, the full run is left to ``test_ray_hosts.py``, which runs it, crashes
included, on two real hosts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from atroposlib.utils.net import free_port
from tests.jsonl import read_jsonl
from tests.launch.run_checks import find_ray_python, group_accounting

REPO = Path(__file__).resolve().parents[2]
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # every Ray listener stays on 127.0.0.1
    "RAY_memory_monitor_refresh_ms": "0",  # it counts host-wide memory (other tests run here)
    "RAY_USAGE_STATS_ENABLED": "0",
}


@pytest.fixture(scope="module")
def ray_python() -> str:
    py, why = find_ray_python()
    if py is None:
        pytest.skip(why)
    return py


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), **RAY_ENV, **extra)


@pytest.fixture(scope="module")
def cluster(ray_python: str, tmp_path_factory) -> Iterator[str]:
    """A Ray head on loopback with node_a and node_b standing for two nodes; its address."""
    temp = Path("/tmp") / f"rayt{os.getpid()}"  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    ray = str(Path(ray_python).parent / "ray")
    head = subprocess.Popen(
        [
            ray,
            "start",
            "--head",
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--resources",
            json.dumps({"node_a": 1, "node_b": 1}),
            "--object-store-memory",
            str(80 * 1024 * 1024),
            "--disable-usage-stats",
            "--include-dashboard",
            "false",
            "--temp-dir",
            str(temp),
            "--ray-client-server-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
        ],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path_factory.mktemp("ray") / "head.log", "wb"),
        start_new_session=True,  # its own process group: stopped by pid below
    )
    address = f"127.0.0.1:{port}"
    try:
        probe = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "r = ray.cluster_resources(); sys.exit(0 if 'node_b' in r else 1)"
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if head.poll() is not None:
                pytest.skip(f"the Ray head did not start (exit {head.returncode})")
            ok = subprocess.run([ray_python, "-c", probe, address], env=_env(), capture_output=True)
            if ok.returncode == 0:
                break
            time.sleep(0.5)
        else:
            pytest.skip("the Ray head did not come up within 60 s")
        yield address
    finally:  # our own head and everything it started, by process group (never `ray stop`)
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        subprocess.run(["rm", "-rf", str(temp)])


@pytest.fixture(scope="module")
def topology(ray_python: str, tmp_path_factory) -> Path:
    model = tmp_path_factory.mktemp("model")
    subprocess.run(
        [ray_python, "-m", "demo.tiny_model", str(model), "--warmup-sft-steps", "5"],
        cwd=REPO,
        env=_env(),
        check=True,
        capture_output=True,
    )
    data = yaml.safe_load((REPO / "configs" / "launch" / "ray_cpu.yaml").read_text())
    warm = str(model / "warm")
    data["prepare"] = []
    for g in data["inference"]:
        g["model"] = warm
    for e in data["envs"]:
        e["flags"]["env"]["tokenizer_name"] = warm
    data["trainer"]["flags"]["model_name"] = warm
    data["supervision"] = {"backoff_s": 0.2, "max_restarts": 3, "stop_timeout_s": 10}
    path = tmp_path_factory.mktemp("topo") / "ray.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _launch(py: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [py, "-m", "atroposlib.cli.launch", *args],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _state(run: Path) -> dict:
    try:
        return json.loads((run / "launch-state.json").read_text())
    except (OSError, ValueError):
        return {}


def _comp(run: Path, name: str) -> dict:
    return next((c for c in _state(run).get("components", []) if c["name"] == name), {})


def _steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    return [row["step"] for row in read_jsonl(path)]


def _wait(cond, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(f"launcher exited {proc.returncode}: {proc.stdout.read()}")
        time.sleep(0.1)
    raise AssertionError(f"timed out; state: {_state_summary(proc)}")


def _state_summary(_proc: subprocess.Popen) -> str:
    return "see the run directory"


def _ours_left(run: Path) -> list[str]:
    """Processes of this run (its directory in their command line) or supervisor actors still alive."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and (str(run) in cmd or "ProcessSupervisor" in cmd):
            left.append(cmd)
    return left


def _two_hosts_possible() -> bool:
    from tests.hosts import HostsUnavailable, check_available

    try:
        check_available()
    except HostsUnavailable:
        return False
    return True


def test_a_ray_run_survives_killed_env_and_engine_and_loses_nothing(
    tmp_path, ray_python, cluster, topology
):
    if _two_hosts_possible():  # the same run, crashes included, on two real hosts: not twice
        pytest.skip("covered on two real network hosts by tests/launch/test_ray_hosts.py")
    run = tmp_path / "run"
    args = ["run", str(topology), "--backend", "ray", "--ray-address", cluster, "--out", str(run)]
    proc = _launch(ray_python, *args, "--set", "trainer.flags.training_steps=10")
    try:
        _wait(lambda: len(_steps(run)) >= 1, 120, proc)
        victims = {n: _comp(run, n)["pid"] for n in ("env-arith-a-0", "inference-b-0")}
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)
        for name, pid in victims.items():
            _wait(lambda n=name: _comp(run, n).get("restarts") == 1, 60, proc)
            assert _comp(run, name)["pid"] != pid
        out, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert proc.returncode == 0, out
    assert "env-arith-a-0 exited with code -9; restarting" in out
    assert "inference-b-0 exited with code -9; restarting" in out
    assert _steps(run) == list(range(1, 11))
    state = _state(run)
    assert state["state"] == "finished" and state["backend"] == "ray"
    placed = {c["name"]: c["state"] for c in state["components"]}
    assert placed == {
        "api": "stopped",
        "inference-a-0": "stopped",
        "inference-b-0": "stopped",
        "env-arith-a-0": "stopped",
        "env-arith-b-0": "stopped",
        "trainer": "done",
        "trainer-node1": "done",
    }
    # both trainer nodes joined one rendezvous on trainer node 0's address and trained (gloo, 2 ranks)
    node1 = (run / "logs" / "trainer-node1.log").read_text()
    assert "--rdzv-conf is_host=0" in node1 and "atropos-grpo: device cpu" in node1
    counts = group_accounting(run)
    assert counts["lost"] == 0 and counts["other"] == 0 and counts["spooled"] == 0, counts
    assert counts["served"] == counts["served_in_batches"] > 0, counts
    assert not _ours_left(run)
    status = subprocess.run(
        [ray_python, "-m", "atroposlib.cli.launch", "status", str(run)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0 and "run: finished" in status.stdout
    assert "backend ray" in status.stdout and "trainer-node1" in status.stdout


def test_stop_ends_a_ray_run_in_order_and_leaves_nothing(tmp_path, ray_python, cluster, topology):
    small = yaml.safe_load(topology.read_text())  # one engine, one env worker, a 1-process trainer
    small["inference"] = small["inference"][:1]
    small["envs"] = small["envs"][1:]
    small["trainer"].update(nnodes=1, node=1)
    small["trainer"]["flags"]["training_steps"] = 1000
    topo = tmp_path / "small.yaml"
    topo.write_text(yaml.safe_dump(small))
    run = tmp_path / "run"
    args = ["run", str(topo), "--backend", "ray", "--ray-address", cluster, "--out", str(run)]
    proc = _launch(ray_python, *args)
    try:
        _wait(lambda: len(_steps(run)) >= 1, 120, proc)
        stop = subprocess.run(
            [ray_python, "-m", "atroposlib.cli.launch", "stop", str(run)],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stop.returncode == 0 and "nothing left running" in stop.stdout, stop.stderr
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    state = _state(run)
    assert state["state"] == "stopped"
    assert {c["state"] for c in state["components"]} == {"stopped"}
    assert "received SIGTERM" in (run / "logs" / "env-arith-b-0.log").read_text()
    assert not _ours_left(run)


def test_gpus_the_cluster_lacks_are_refused_with_nothing_started(
    tmp_path, ray_python, cluster, topology
):
    run = tmp_path / "run"
    args = ["run", str(topology), "--backend", "ray", "--ray-address", cluster, "--out", str(run)]
    done = subprocess.run(
        [ray_python, "-m", "atroposlib.cli.launch", *args, "--set", "inference.0.gpus=1"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"atropos-launch: error: the topology asks for 1 GPU(s) but the Ray cluster at {cluster} "
        "has 0 (set gpus: 0 to run on CPU)"
    ]
    assert not run.exists()


def test_an_address_where_nothing_answers_is_refused_quickly(tmp_path, ray_python, topology):
    run = tmp_path / "run"
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = subprocess.run(
        [
            ray_python,
            "-m",
            "atroposlib.cli.launch",
            "run",
            str(topology),
            "--backend",
            "ray",
            "--ray-address",
            address,
            "--out",
            str(run),
        ],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"atropos-launch: error: --ray-address {address}: nothing answers at {address} "
        "(connection refused); is the Ray cluster up (ray start --head)?"
    ]
    assert time.monotonic() - started < 30 and not run.exists()


def test_more_nodes_than_the_cluster_has_are_refused_with_nothing_started(
    tmp_path, ray_python, cluster, topology
):
    run = tmp_path / "run"
    args = ["run", str(topology), "--backend", "ray", "--ray-address", cluster, "--out", str(run)]
    done = subprocess.run(
        [ray_python, "-m", "atroposlib.cli.launch", *args, "--set", "cluster.ray_nodes=[]"],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "atropos-launch: error: the topology asks for 2 nodes (cluster.nodes) but the Ray cluster "
        f"at {cluster} has 1"
    ]
    assert not run.exists()

"""``--dry-run`` on every backend prints what would run where and starts nothing; the SLURM script is
one allocation with an ``srun --overlap`` step per component and node names resolved in the job."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from atroposlib.cli.launch import main

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "launch" / "demo_cpu.yaml"
GPU = REPO / "configs" / "launch" / "gpu_2node.yaml"


def _dry(capsys, topo: Path, out: Path, *extra: str) -> str:
    assert main(["run", str(topo), "--out", str(out), "--dry-run", *extra]) == 0
    return capsys.readouterr().out


def test_local_dry_run_lists_every_component_and_starts_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    text = _dry(capsys, DEMO, tmp_path / "run")
    for name in ("prepare-model", "api", "inference-engine-0", "env-arithmetic-0", "trainer"):
        assert f"\n{name}: " in text
    assert "this machine" in text and "atroposlib.cli.serve_model" in text
    assert not (tmp_path / "run").exists()


def test_ray_dry_run_places_components_on_nodes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    text = _dry(capsys, GPU, tmp_path / "run", "--backend", "ray")
    rows = {
        line.split()[0]: line
        for line in text.splitlines()
        if line.startswith(("inference-", "trainer ", "api "))
    }
    # no ray_nodes: Ray places every actor; GPUs come from placement groups reserved first
    assert "pg inference-vllm-0[0] STRICT_PACK GPU=8" in rows["inference-vllm-0"]
    assert "pg trainer[0] STRICT_PACK GPU=8" in rows["trainer"]
    assert rows["api"].split()[1] == "any" and "num_cpus=0" in rows["api"]
    assert "--host @HOST@" in text and "not implemented" not in text
    assert not (tmp_path / "run").exists()


def test_ray_dry_run_pins_nodes_to_their_resources(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    text = _dry(
        capsys, REPO / "configs" / "launch" / "ray_cpu.yaml", tmp_path / "run", "--backend", "ray"
    )
    rows = {
        line.split()[0]: line for line in text.splitlines() if line.startswith(("env-", "trainer"))
    }
    assert "node0 (node_a)" in rows["env-arith-a-0"] and "node_a=0.001" in rows["env-arith-a-0"]
    assert "node1 (node_b)" in rows["env-arith-b-0"]
    assert "node0 (node_a)" in rows["trainer"] and "node1 (node_b)" in rows["trainer-node1"]
    cmds = {
        line.split(":")[0]: line for line in text.splitlines() if "torch.distributed.run" in line
    }
    assert (
        "--rdzv-conf is_host=1" in cmds["trainer"]
        and "--rdzv-conf is_host=0" in cmds["trainer-node1"]
    )
    assert "--rdzv-endpoint @NODE0@:" in cmds["trainer-node1"]


def test_slurm_dry_run_is_one_allocation_of_overlapping_steps(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no sbatch needed to print the script
    script = _dry(capsys, GPU, tmp_path / "run", "--backend", "slurm")
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=qwen-gsm8k\n#SBATCH --nodes=2\n")
    assert "#SBATCH --gpus-per-node=8" in script and "#SBATCH --time=04:00:00" in script
    assert 'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in script
    steps = [line for line in script.splitlines() if "srun " in line]
    assert len(steps) == 1 + 1 + 4 + 1 and all("srun --overlap" in s for s in steps)
    vllm = next(s for s in steps if "inference-vllm-0" in s)
    assert '--nodelist="$NODE0"' in vllm and "--tensor-parallel-size 8" in vllm
    assert vllm.startswith("supervise inference-vllm-0 srun")  # restarted on a crash
    trainer = next(s for s in steps if "trainer.log" in s)
    assert '--nodelist="$NODE1"' in trainer and "--nproc-per-node 8" in trainer
    assert (
        '--api-url http://"$HOST0":8000' in trainer
        and '--inference-urls http://"$HOST0":9001' in trainer
    )
    assert (
        script.index("PIDS[api]")
        < script.index("PIDS[inference-vllm-0]")
        < script.index("PIDS[env-gsm8k-0]")
        < script.index("PIDS[trainer]")
    )
    assert "for role in trainer env inference api" in script
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    assert not (tmp_path / "run").exists()


def test_slurm_multi_node_trainer_uses_rendezvous(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    data = yaml.safe_load(GPU.read_text())
    data["cluster"]["nodes"] = 3
    data["trainer"]["nnodes"] = 2
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(data))
    script = _dry(capsys, topo, tmp_path / "run", "--backend", "slurm")
    trainer = next(s for s in script.splitlines() if "trainer.log" in s)
    assert "--nodes=2" in trainer and '--nodelist="$NODE1,$NODE2"' in trainer
    assert "--rdzv-backend c10d" in trainer and '--rdzv-endpoint "$HOST1":29500' in trainer


def test_slurm_without_sbatch_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["run", str(GPU), "--out", str(tmp_path / "run"), "--backend", "slurm"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "atropos-launch: error: --backend slurm: sbatch is not on PATH (is this a SLURM login node?)\n"
    )
    assert not (tmp_path / "run").exists()


def test_too_many_gpus_for_the_allocation(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    data = yaml.safe_load(GPU.read_text())
    data["inference"][0]["count"] = 2
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(data))
    assert (
        main(["run", str(topo), "--out", str(tmp_path / "run"), "--backend", "slurm", "--dry-run"])
        == 2
    )
    assert "asks for 8 GPUs on node 0, which has 0 left" in capsys.readouterr().err


def test_ray_runs_without_ray_installed_say_how_to_install_it(tmp_path, capsys, monkeypatch):
    import importlib.util

    if importlib.util.find_spec("ray") is not None:
        pytest.skip("ray is installed in this environment (the project venv has no ray)")
    monkeypatch.chdir(REPO)
    argv = ["run", str(DEMO), "--out", str(tmp_path / "run"), "--backend", "ray"]
    assert main([*argv, "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "atropos-launch: error: --backend ray: ray is not installed (pip install 'atroposlib[ray]')\n"
    )
    assert not (tmp_path / "run").exists()


def test_ray_nodes_must_match_the_node_count(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    argv = ["run", str(REPO / "configs" / "launch" / "ray_cpu.yaml"), "--out", str(tmp_path / "r")]
    assert main([*argv, "--backend", "ray", "--dry-run", "--set", "cluster.nodes=3"]) == 2
    assert "cluster: ray_nodes names 2 node(s): set nodes: 2" in capsys.readouterr().err

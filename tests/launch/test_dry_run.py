"""``--dry-run`` on every backend prints what would run where and starts nothing; the SLURM script is
one allocation with an ``srun --overlap`` step per component and node names resolved in the job."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
        line.split()[0]: line.split()
        for line in text.splitlines()
        if line.startswith(("inference-", "trainer "))
    }
    assert (
        rows["inference-vllm-0"][1] == "node0" and rows["inference-vllm-0"][2] == "0,1,2,3,4,5,6,7"
    )
    assert rows["trainer"][1] == "node1"


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


def test_ray_runs_are_refused_until_the_backend_exists(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["run", str(DEMO), "--out", str(tmp_path / "run"), "--backend", "ray"]) == 2
    assert "--backend ray runs are not implemented yet" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()

"""FSDP2 set-up without the whole model on every rank: the model is built on the meta device, rank 0
alone reads the weights, and each rank receives only its shard. Shown by each rank's peak memory on 2
CPU ranks (gloo), against the old set-up (every rank loads the whole model, then shards it) measured
in the same test, and by the sharded model holding exactly the folder's weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _trainer_helpers import REPO, child_env

WORKER = Path(__file__).with_name("_fsdp_load_worker.py")


def _set_up(model: Path, mode: str) -> dict[int, dict]:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(WORKER),
        str(model),
        mode,
    ]
    proc = subprocess.run(
        cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.split("\n") if line.startswith("{")]
    return {row["rank"]: row for row in rows}


@pytest.mark.slow  # two torchrun set-ups of a 19M-parameter model (~30 s each on a loaded machine)
def test_fsdp_ranks_never_hold_the_whole_model(tmp_path):
    from atroposlib.inference.tiny_model import build_tiny_model

    model = build_tiny_model(
        tmp_path / "model", hidden_size=512, num_layers=4, num_heads=8, intermediate_size=2048
    )
    model_mib = (model / "model.safetensors").stat().st_size / 2**20
    whole, sharded = _set_up(model, "whole"), _set_up(model, "sharded")
    shard_mib = sharded[1]["shard_mib"]
    assert 0.45 * model_mib < shard_mib < 0.55 * model_mib  # half of the model per rank
    # before: rank 1 held the whole model (then its shard) during the set-up
    assert whole[1]["peak_rise_mib"] > model_mib, whole
    # now: its shard and one parameter in flight, nothing more (peak RSS also counts the allocator's
    # and gloo's buffers: shard + 14.5 MiB was seen in a full suite run, the whole model is 65 MiB)
    assert sharded[1]["peak_rise_mib"] < shard_mib + 0.3 * model_mib, sharded
    assert sharded[1]["peak_rise_mib"] < 0.6 * whole[1]["peak_rise_mib"]
    # rank 0 read the weights once (into host memory: on a GPU machine not on its GPU) and the
    # sharded model holds exactly them, computing what the old set-up computed
    assert sharded[0]["same_weights"] and whole[0]["same_weights"]
    assert sharded[0]["logits"] == whole[0]["logits"]

"""FSDP2 with gradient checkpointing, a sharded KL reference model and bf16 compute
(MixedPrecisionPolicy over fp32 shards), on 2 CPU ranks (gloo), against one process."""

from __future__ import annotations

import pytest
import torch
from _trainer_helpers import (
    TRAINER_RUN_TIMEOUT_S,
    metrics_steps,
    post_groups,
    scripted_groups,
    start,
    trainer_cmd,
)

from tests.jsonl import read_jsonl

_TORCHRUN_2 = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
_FLAGS = (
    "--weight-refresh",
    "none",
    "--gradient-checkpointing",
    "--kl-coef",
    "0.1",
    "--aggregation",
    "sequence",
    "--gradient-accumulation-steps",
    "4",  # 8 micro-batches of 1 sequence: rank 1's share of each is empty (dummy passes)
)


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _run(run_api, tiny_model, tmp_path, name, groups, *extra, launcher=()):
    api = run_api("--store", "memory")
    post_groups(api.url, groups)
    save = tmp_path / name
    cmd = trainer_cmd(tiny_model, api.url, save, 2, *_FLAGS, *extra)
    if launcher:
        cmd = [cmd[0], *launcher, *cmd[1:]]
    log = tmp_path / f"{name}.log"
    proc = start(cmd, log)
    try:
        assert proc.wait(TRAINER_RUN_TIMEOUT_S) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    return save, log.read_text()


def _rows(save):
    rows = read_jsonl(save / "metrics.jsonl")
    return {r["step"]: r for r in rows}


@pytest.mark.slow  # four trainer runs, two under torchrun: 60 s quiet, 250-300+ s on a loaded machine
@pytest.mark.timeout(3 * TRAINER_RUN_TIMEOUT_S)
def test_fsdp_with_checkpointing_sharded_reference_and_bf16_policy_matches_one_process(
    run_api, tiny_model, tmp_path
):
    groups = scripted_groups(4, seed=8)
    fsdp_args = ("--parallel", "fsdp")
    runs = {}
    for dtype in ("float32", "bfloat16"):
        for name, extra, launcher in (("single", (), ()), ("fsdp", fsdp_args, _TORCHRUN_2)):
            runs[name, dtype] = _run(
                run_api,
                tiny_model,
                tmp_path,
                f"{name}-{dtype}",
                groups,
                "--dtype",
                dtype,
                *extra,
                launcher=launcher,
            )
    for save, _ in runs.values():
        assert metrics_steps(save) == [1, 2]
    assert "reference model sharded with FSDP2 over 2 ranks" in runs["fsdp", "float32"][1]
    assert "float32 master weights, bfloat16 compute (autocast)" in runs["single", "bfloat16"][1]
    fsdp_bf16_log = runs["fsdp", "bfloat16"][1]
    assert "float32 master weights, bfloat16 compute (FSDP2 MixedPrecisionPolicy)" in fsdp_bf16_log

    # fp32: checkpointing, the sharded reference and the empty-share dummy passes change nothing
    start_weights = _weights(tiny_model)
    a = _weights(runs["single", "float32"][0] / "checkpoints" / "step_0000002")
    b = _weights(runs["fsdp", "float32"][0] / "checkpoints" / "step_0000002")
    assert a.keys() == b.keys()
    for k, v in a.items():
        assert torch.allclose(v, b[k], atol=1e-5), k
    assert any(not torch.equal(v, start_weights[k]) for k, v in a.items())

    # bf16: FSDP's policy computes what autocast computes (step 1 starts from the same weights), not
    # what fp32 computes, and the stored weights stay fp32
    one = {key: _rows(save)[1] for key, (save, _) in runs.items()}
    for field in ("loss", "kl", "grad_norm"):
        auto, policy = one["single", "bfloat16"][field], one["fsdp", "bfloat16"][field]
        assert policy == pytest.approx(auto, rel=2e-2, abs=1e-4), field
    assert one["single", "bfloat16"]["loss"] != one["single", "float32"]["loss"]
    for k, v in _weights(runs["fsdp", "bfloat16"][0] / "checkpoints" / "step_0000002").items():
        assert v.dtype == torch.float32, k

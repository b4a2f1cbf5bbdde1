"""The trainer against a real run-api and a scripted producer: the loop turns, batches are acknowledged,
weights change, and a trainer killed mid-run resumes at the right step without losing a batch."""

from __future__ import annotations

import time

import pytest
import torch
from _trainer_helpers import metrics_steps, post_groups, scripted_groups, start, trainer_cmd

from atroposlib.api.client import TrajectoryClient


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _wait(cond, timeout=60.0, what=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_loop_acks_changes_weights_and_resumes_after_kill(run_api, tiny_model, tmp_path):
    api = run_api()
    save = tmp_path / "trainer"
    groups = scripted_groups(12)  # 6 batches of 2 groups x 4 sequences
    post_groups(api.url, groups[:6])

    # run 1: three steps, checkpoint every step
    first = start(
        trainer_cmd(
            tiny_model, api.url, save, 3, "--checkpoint-interval", "1", "--weight-refresh", "none"
        ),
        tmp_path / "t1.log",
    )
    assert first.wait(120) == 0, (tmp_path / "t1.log").read_text()[-3000:]
    assert metrics_steps(save) == [1, 2, 3]
    with TrajectoryClient(api.url) as c:
        st = c.status()
        assert (st.current_step, st.queue_size) == (3, 0)
        states = {p.group["group_id"]: p.state for p in c.peek(limit=50).groups}
    assert all(states[g["group_id"]] == "acked" for g in groups[:6])
    before, after = _weights(tiny_model), _weights(save / "checkpoints" / "step_0000003")
    assert any(not torch.equal(before[k], after[k]) for k in before)

    # run 2: resume, train step 4, then get killed while batch 5 is delivered
    second = start(
        trainer_cmd(
            tiny_model,
            api.url,
            save,
            6,
            "--checkpoint-interval",
            "1",
            "--weight-refresh",
            "none",
            "--resume",
        ),
        tmp_path / "t2.log",
    )
    post_groups(api.url, groups[6:8])
    _wait(lambda: 4 in metrics_steps(save), what="step 4")
    post_groups(api.url, groups[8:10])
    with TrajectoryClient(api.url) as c:
        _wait(lambda: c.status().current_step == 5, what="batch 5 delivered")
    second.kill()
    second.wait(30)
    # whenever the kill lands, every checkpointed step already has its metrics row
    ckpt_steps = {
        int(d.name[5:]) for d in (save / "checkpoints").glob("step_*") if d.name[5:].isdigit()
    }
    assert ckpt_steps <= set(metrics_steps(save)), (ckpt_steps, metrics_steps(save))
    assert "resumed from" in (tmp_path / "t2.log").read_text()

    # run 3: resume again; batch 5 comes back unless its update was already checkpointed and acked
    third = start(
        trainer_cmd(
            tiny_model,
            api.url,
            save,
            6,
            "--checkpoint-interval",
            "1",
            "--weight-refresh",
            "none",
            "--resume",
        ),
        tmp_path / "t3.log",
    )
    post_groups(api.url, groups[10:12])
    assert third.wait(120) == 0, (tmp_path / "t3.log").read_text()[-3000:]
    # six batches, six steps, one metrics row each (a step trained again after the kill replaces
    # the row its first try wrote): none lost, none doubled
    assert metrics_steps(save) == [1, 2, 3, 4, 5, 6]
    log3 = (tmp_path / "t3.log").read_text()
    assert "resumed from" in log3 and ("at step 4" in log3 or "at step 5" in log3)
    with TrajectoryClient(api.url) as c:
        st = c.status()
        assert (st.current_step, st.queue_size) == (6, 0)
        states = {p.group["group_id"]: p.state for p in c.peek(limit=50).groups}
    assert all(states[g["group_id"]] == "acked" for g in groups)


def _forget_checkpoints_after(save, step):
    """The disk as a trainer killed right after acknowledging the batches past ``step`` leaves it:
    checkpoints up to ``step`` only (``step`` 0: none at all)."""
    import shutil

    root = save / "checkpoints"
    for d in root.glob("step_*"):
        if int(d.name[5:]) > step:
            shutil.rmtree(d)
    if step:
        (root / "latest").write_text(f"step_{step:07d}")
    else:
        (root / "latest").unlink()


@pytest.mark.parametrize(("interval", "kept"), [(0, 0)])
def test_resume_says_how_many_acknowledged_batches_the_model_lacks(
    run_api, tiny_model, tmp_path, interval, kept
):
    """checkpoint_interval 2 (a checkpoint at step 2, batch 3 acknowledged after it) and 0, the
    default (no checkpoint before the end): the resumed trainer continues at the API's step, says in
    one line which acknowledged batches are not in the model, and keeps one metrics row per step."""
    api = run_api()
    save = tmp_path / "trainer"
    groups = scripted_groups(10)
    post_groups(api.url, groups[:6])
    flags = ("--checkpoint-interval", str(interval), "--weight-refresh", "none")
    first = start(trainer_cmd(tiny_model, api.url, save, 3, *flags), tmp_path / "t1.log")
    assert first.wait(120) == 0, (tmp_path / "t1.log").read_text()[-3000:]
    _forget_checkpoints_after(save, kept)
    post_groups(api.url, groups[6:])
    cmd = trainer_cmd(tiny_model, api.url, save, 5, *flags, "--resume")
    second = start(cmd, tmp_path / "t2.log")
    assert second.wait(120) == 0, (tmp_path / "t2.log").read_text()[-3000:]
    log = (tmp_path / "t2.log").read_text()
    since = (
        "checkpoint step 2 (step 3)" if kept else "no checkpoint (the initial weights) (steps 1-3)"
    )
    missing = 1 if kept else 3
    lines = [line for line in log.splitlines() if "are not in the model" in line]
    assert (
        len(lines) == 1
        and (
            f"resume: {missing} batch(es) acknowledged after {since} are not in the model "
            f"(checkpoint_interval {interval}; 1 makes every resume exact); continuing at step 3"
        )
        in lines[0]
    ), log[-3000:]
    assert metrics_steps(save) == [1, 2, 3, 4, 5]
    with TrajectoryClient(api.url) as c:
        assert (c.status().current_step, c.status().queue_size) == (5, 0)


_TORCHRUN_2 = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _train_on(run_api, tiny_model, tmp_path, name, groups, steps, *extra, launcher=()):
    """Post ``groups`` to a fresh API and train ``steps`` steps on them; returns the save folder."""
    api = run_api("--store", "memory")
    post_groups(api.url, groups)
    save = tmp_path / name
    cmd = trainer_cmd(tiny_model, api.url, save, steps, "--weight-refresh", "none", *extra)
    if launcher:
        cmd = [cmd[0], *launcher, *cmd[1:]]
    log = tmp_path / f"{name}.log"
    proc = start(cmd, log)
    try:
        assert proc.wait(180) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:  # torchrun forwards SIGTERM to its workers
            proc.terminate()
            proc.wait(30)
    return save


def _assert_same_trained_weights(tiny_model, single, other, atol):
    assert single and single.keys() == other.keys()
    for k, v in single.items():
        assert torch.allclose(v, other[k], atol=atol), (k, float((v - other[k]).abs().max()))
    start_weights = _weights(tiny_model)  # both really trained: equal because they learned the same
    assert any(
        not torch.equal(v, start_weights[k]) for k, v in single.items() if k in start_weights
    )


def test_two_ranks_with_gloo_match_one_process(run_api, tiny_model, tmp_path):
    """torchrun with 2 CPU processes (gloo, DDP): rank 0 pulls and broadcasts, both train, and the
    result equals a single process trained on the same batches."""
    groups = scripted_groups(4, seed=3)
    results = {}
    for name, launcher in (("single", ()), ("ddp", _TORCHRUN_2)):
        save = _train_on(run_api, tiny_model, tmp_path, name, groups, 2, launcher=launcher)
        assert metrics_steps(save) == [1, 2]
        results[name] = _weights(save / "checkpoints" / "step_0000002")
    _assert_same_trained_weights(tiny_model, results["single"], results["ddp"], atol=1e-5)


def test_two_fsdp_ranks_with_gloo_match_one_process_and_resume(run_api, tiny_model, tmp_path):
    """torchrun with 2 CPU processes (gloo, FSDP2 ``fully_shard``): the full weights rank 0 gathers and
    writes as an HF folder equal a single process's on the same batches, and an FSDP resume restores
    the optimizer state (gathered in full at save), so 2+1 steps with a restart equal 3 straight steps."""
    from transformers import AutoModelForCausalLM

    groups = scripted_groups(6, seed=5)
    single = _train_on(
        run_api, tiny_model, tmp_path, "single", groups, 3, "--checkpoint-interval", "1"
    )
    assert metrics_steps(single) == [1, 2, 3]
    fsdp = _train_on(
        run_api,
        tiny_model,
        tmp_path,
        "fsdp",
        groups[:4],
        2,
        "--parallel",
        "fsdp",
        launcher=_TORCHRUN_2,
    )
    assert metrics_steps(fsdp) == [1, 2]
    step2 = fsdp / "checkpoints" / "step_0000002"
    _assert_same_trained_weights(
        tiny_model, _weights(single / "checkpoints" / "step_0000002"), _weights(step2), atol=1e-5
    )
    reloaded = AutoModelForCausalLM.from_pretrained(
        step2
    )  # a plain HF folder, no FSDP needed to read it
    assert sum(p.numel() for p in reloaded.parameters()) > 0

    # 8 micro-batches of one sequence: rank 1's share of each is empty, and it must still join the
    # collectives (a hang otherwise); the objective does not depend on the split
    resumed = _train_on(
        run_api,
        tiny_model,
        tmp_path,
        "fsdp",
        groups[4:],
        3,
        "--parallel",
        "fsdp",
        "--resume",
        "--gradient-accumulation-steps",
        "4",
        launcher=_TORCHRUN_2,
    )
    log = (tmp_path / "fsdp.log").read_text()
    assert "resumed from" in log and "optimizer moments are not restored" not in log
    assert metrics_steps(resumed) == [1, 2, 3]
    _assert_same_trained_weights(
        tiny_model,
        _weights(single / "checkpoints" / "step_0000003"),
        _weights(fsdp / "checkpoints" / "step_0000003"),
        atol=1e-5,
    )


@pytest.mark.slow  # launches the engine process twice (~10 s each on a loaded 2-core machine)
def test_restart_mode_relaunches_our_engine_on_new_weights(run_api, tiny_model, tmp_path):
    """restart: the trainer launches the inference server itself and relaunches it on each new checkpoint."""
    import sys

    from atroposlib.utils.net import free_port

    api = run_api("--store", "memory")
    post_groups(api.url, scripted_groups(4, seed=5))
    save = tmp_path / "trainer"
    command = (
        f"{sys.executable} -m atroposlib.cli.serve_model --model {{model_path}} --port {{port}} "
        "--torch-threads 1"
    )
    port = free_port()
    proc = start(
        trainer_cmd(
            tiny_model,
            api.url,
            save,
            1,
            "--weight-refresh",
            "restart",
            "--vllm-restart-interval",
            "1",
            "--vllm-port",
            str(port),
            "--inference-command",
            command,
        ),
        tmp_path / "t.log",
    )
    assert proc.wait(180) == 0, (tmp_path / "t.log").read_text()[-3000:]
    launches = [
        line
        for line in (tmp_path / "t.log").read_text().splitlines()
        if "starting inference server" in line
    ]
    assert len(launches) == 2  # the initial weights, then the weights after step 1
    assert str(tiny_model) in launches[0]
    assert "weights/step_0000001" in launches[1]
    assert (save / "inference_server.log").read_text().count("atropos-serve-model: serving") == 2
    import httpx

    with pytest.raises(httpx.TransportError):  # the trainer stopped the server it launched
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)

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
    first = start(trainer_cmd(tiny_model, api.url, save, 3, "--checkpoint-interval", "1",
                              "--weight-refresh", "none"), tmp_path / "t1.log")
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
    second = start(trainer_cmd(tiny_model, api.url, save, 6, "--checkpoint-interval", "1",
                               "--weight-refresh", "none", "--resume"), tmp_path / "t2.log")
    post_groups(api.url, groups[6:8])
    _wait(lambda: 4 in metrics_steps(save), what="step 4")
    post_groups(api.url, groups[8:10])
    with TrajectoryClient(api.url) as c:
        _wait(lambda: c.status().current_step == 5, what="batch 5 delivered")
    second.kill()
    second.wait(30)
    assert "resumed from" in (tmp_path / "t2.log").read_text()

    # run 3: resume again; batch 5 comes back unless its update was already checkpointed and acked
    third = start(trainer_cmd(tiny_model, api.url, save, 6, "--checkpoint-interval", "1",
                              "--weight-refresh", "none", "--resume"), tmp_path / "t3.log")
    post_groups(api.url, groups[10:12])
    assert third.wait(120) == 0, (tmp_path / "t3.log").read_text()[-3000:]
    steps = metrics_steps(save)
    assert sorted(set(steps)) == [1, 2, 3, 4, 5, 6]  # six batches, six steps: none lost, none doubled
    log3 = (tmp_path / "t3.log").read_text()
    assert "resumed from" in log3 and ("at step 4" in log3 or "at step 5" in log3)
    with TrajectoryClient(api.url) as c:
        st = c.status()
        assert (st.current_step, st.queue_size) == (6, 0)
        states = {p.group["group_id"]: p.state for p in c.peek(limit=50).groups}
    assert all(states[g["group_id"]] == "acked" for g in groups)


def test_two_ranks_with_gloo_match_one_process(run_api, tiny_model, tmp_path):
    """torchrun with 2 CPU processes (gloo, DDP): rank 0 pulls and broadcasts, both train, and the
    result equals a single process trained on the same batches."""
    groups = scripted_groups(4, seed=3)
    results = {}
    for name, launcher in (("single", []), ("ddp", ["-m", "torch.distributed.run", "--standalone",
                                                     "--nproc-per-node", "2"])):
        api = run_api("--store", "memory")
        post_groups(api.url, groups)
        save = tmp_path / name
        cmd = trainer_cmd(tiny_model, api.url, save, 2, "--weight-refresh", "none")
        if launcher:
            cmd = [cmd[0], *launcher, *cmd[1:]]
        proc = start(cmd, tmp_path / f"{name}.log")
        try:
            assert proc.wait(180) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
        finally:
            if proc.poll() is None:  # torchrun forwards SIGTERM to its workers
                proc.terminate()
                proc.wait(30)
        assert metrics_steps(save) == [1, 2]
        results[name] = _weights(save / "checkpoints" / "step_0000002")
    assert results["single"] and results["single"].keys() == results["ddp"].keys()
    for k, v in results["single"].items():
        assert torch.allclose(v, results["ddp"][k], atol=1e-5), k
    start_weights = _weights(tiny_model)  # both really trained: equal because they learned the same
    assert any(not torch.equal(v, start_weights[k]) for k, v in results["single"].items() if k in start_weights)


@pytest.mark.slow  # launches the engine process twice (~10 s each on a loaded 2-core machine)
def test_restart_mode_relaunches_our_engine_on_new_weights(run_api, tiny_model, tmp_path):
    """restart: the trainer launches the inference server itself and relaunches it on each new checkpoint."""
    import sys

    from atroposlib.utils.net import free_port

    api = run_api("--store", "memory")
    post_groups(api.url, scripted_groups(4, seed=5))
    save = tmp_path / "trainer"
    command = (f"{sys.executable} -m atroposlib.cli.serve_model --model {{model_path}} --port {{port}} "
               "--torch-threads 1")
    port = free_port()
    proc = start(trainer_cmd(tiny_model, api.url, save, 1, "--weight-refresh", "restart", "--vllm-restart-interval",
                             "1", "--vllm-port", str(port), "--inference-command", command),
                 tmp_path / "t.log")
    assert proc.wait(180) == 0, (tmp_path / "t.log").read_text()[-3000:]
    launches = [line for line in (tmp_path / "t.log").read_text().splitlines() if "starting inference server" in line]
    assert len(launches) == 2  # the initial weights, then the weights after step 1
    assert str(tiny_model) in launches[0]
    assert "weights/step_0000001" in launches[1]
    assert (save / "inference_server.log").read_text().count("Uvicorn running") == 2
    import httpx

    with pytest.raises(httpx.TransportError):  # the trainer stopped the server it launched
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)

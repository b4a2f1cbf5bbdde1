"""``--weight-refresh nccl``, the trainer's side: the choreography of vLLM's weight-transfer routes, the
broadcast, and what a refusing, silent or failing server does to the run (one line; the run falls back
to disk or ends; nothing hangs). The server is ``atroposlib.testing.fake_weight_transfer`` (real HTTP,
a real gloo group, vLLM's state rules); ``tests/real_vllm/test_vllm_weight_transfer.py`` runs the same
against the vLLM CPU build."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import torch
from _trainer_helpers import (
    REPO,
    TRAINER_RUN_TIMEOUT_S,
    child_env,
    post_groups,
    scripted_groups,
    start,
    trainer_cmd,
)

from atroposlib.errors import WeightTransferError
from atroposlib.utils.net import free_port, wait_for_http
from example_trainer.checkpoint import publishable
from example_trainer.config import TrainingConfig
from example_trainer.refresh_modes import make_weight_refresh
from example_trainer.transfer_group import GlooGroup, _join
from example_trainer.transfer_refresh import TransferRefresh
from tests.jsonl import read_jsonl


class FakeServer:
    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = tmp_path / f"received-{mode}.pt"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "atroposlib.testing.fake_weight_transfer",
                "--port",
                str(self.port),
                "--out",
                str(self.out),
                "--mode",
                mode,
            ],
            env=child_env(),
            cwd=REPO,
        )
        wait_for_http(self.url + "/health", timeout=60, proc=self.proc)

    def received(self) -> dict:
        return torch.load(self.out, weights_only=False)

    def state(self) -> dict:
        state = httpx.get(self.url + "/state", timeout=10).json()
        return {k: state[k] for k in ("paused", "active")}

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def fake_server(tmp_path):
    servers: list[FakeServer] = []

    def start(mode: str = "ok") -> FakeServer:
        servers.append(FakeServer(tmp_path, mode))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def _refresher(tmp_path, url, dtype=torch.float32, **kw) -> TransferRefresh:
    cfg = TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh="nccl",
        transfer_backend="atropos_gloo",
        inference_urls=[url],
        inference_server="atropos",  # the disk path of a fallback: /update_weights_from_disk
        async_refresh=False,
        **kw,
    )
    refresher = make_weight_refresh(cfg, publish_dtype=dtype, device=torch.device("cpu"))
    assert isinstance(refresher, TransferRefresh)
    return refresher


def _trained(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-2)
    return model


def test_the_weights_reach_the_workers_in_the_publish_dtype(tmp_path, tiny_model, fake_server):
    server = fake_server("ok")
    refresher = _refresher(tmp_path, server.url, dtype=torch.bfloat16)
    try:
        refresher.start(str(tiny_model))
        model = _trained(tiny_model)
        for step in (3, 4):
            out = refresher.refresh(step, model, None)
            assert out["transfer_fallback"] == 0 and out["weights_version"] == str(step)
            got = server.received()
            assert got["version"] == str(step)
            want = publishable(model)  # what a published folder would hold: the tied head once
            assert list(got["weights"]) == list(want) and "lm_head.weight" not in want
            for name, t in want.items():
                assert got["weights"][name].dtype == torch.bfloat16, name
                assert torch.equal(got["weights"][name], t.to(torch.bfloat16)), name
            assert out["transfer_mib"] == pytest.approx(
                sum(t.numel() * 2 for t in want.values()) / 2**20, abs=1e-3
            )
            assert server.state() == {"paused": False, "active": False}  # resumed, update closed
    finally:
        refresher.close()


def test_a_server_without_weight_transfer_falls_back_to_disk_once(
    tmp_path, tiny_model, fake_server, caplog
):
    server = fake_server("not-configured")
    refresher = _refresher(tmp_path, server.url)
    try:
        with caplog.at_level(logging.ERROR, logger="example_trainer.transfer_refresh"):
            refresher.start(str(tiny_model))
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "\n" not in lines[0], lines
        assert "/init_weight_transfer_engine answered 500" in lines[0]
        assert "Weight transfer not configured" in lines[0]
        assert "--weight-transfer-config" in lines[0]  # the fix
        assert "publishing through disk" in lines[0]
        model = _trained(tiny_model)
        for step in (1, 2):
            out = refresher.refresh(step, model, None)
            assert out["transfer_fallback"] == 1 and out["weights_version"] == step
    finally:
        refresher.close()
    assert len(caplog.records) == 1  # said once, counted in every row after


def test_a_refused_setup_ends_the_run_when_asked(tmp_path, tiny_model, fake_server):
    server = fake_server("not-configured")
    refresher = _refresher(tmp_path, server.url, transfer_fallback="fail")
    try:
        with pytest.raises(WeightTransferError, match="Weight transfer not configured") as err:
            refresher.start(str(tiny_model))
        assert "\n" not in str(err.value)
    finally:
        refresher.close()


def test_workers_that_never_join_end_the_wait_at_the_deadline(tmp_path, tiny_model, fake_server):
    server = fake_server("never-join")
    refresher = _refresher(tmp_path, server.url, transfer_fallback="fail", transfer_timeout_s=2)
    t0 = time.monotonic()
    try:
        with pytest.raises(WeightTransferError, match="within 2 s"):
            refresher.start(str(tiny_model))
    finally:
        refresher.close()
    assert time.monotonic() - t0 < 15


def test_a_worker_failing_mid_update_stops_the_broadcast(tmp_path, tiny_model, fake_server):
    """The worker fails after two tensors: the trainer stops broadcasting at once (it does not wait
    for the deadline on a peer that left), resumes the server and says what failed."""
    server = fake_server("fail-update")
    refresher = _refresher(tmp_path, server.url, transfer_fallback="fail", transfer_timeout_s=20)
    try:
        refresher.start(str(tiny_model))
        t0 = time.monotonic()
        with pytest.raises(WeightTransferError, match="simulated worker failure") as err:
            refresher.refresh(1, _trained(tiny_model), None)
        assert time.monotonic() - t0 < 15 and "\n" not in str(err.value)
        assert server.state() == {"paused": False, "active": False}
        assert refresher.group is None  # a cut-short stream is not reused
    finally:
        refresher.close()


def test_a_stalled_worker_ends_the_transfer_at_the_deadline(tmp_path, tiny_model, fake_server):
    """The worker joined, then takes no tensor and never answers: the trainer gives up after
    ``transfer_timeout_s`` with one line, falls back to disk and says so in the row."""
    server = fake_server("stall-update")
    refresher = _refresher(tmp_path, server.url, transfer_timeout_s=3)
    try:
        refresher.start(str(tiny_model))
        t0 = time.monotonic()
        out = refresher.refresh(1, _trained(tiny_model), None)
        assert time.monotonic() - t0 < 40
        assert out["transfer_fallback"] == 1 and refresher.group is None
    finally:
        refresher.close()


def test_a_group_that_serves_only_cuda_refuses_cpu_tensors_as_nccl_does():
    """The gloo group built with NCCL's device rule (``device_type="cuda"``): a CPU tensor is refused
    as NCCL refuses it, so the trainer's side must hand the group tensors on ``group.device`` (the
    sender moves each one there; on a machine without a GPU that move is what fails)."""
    import threading
    from datetime import timedelta

    import torch.distributed as dist

    group = GlooGroup("127.0.0.1", device_type="cuda")
    info = group.init_info(1, 2, 30)
    joined = {}

    def worker_joins() -> None:  # the worker's end, as the atropos_gloo engine joins
        store = dist.TCPStore(info["master_address"], info["master_port"], None, False)
        prefixed = dist.PrefixStore(info["session"], store)
        joined["pg"] = dist.ProcessGroupGloo(prefixed, 1, 2, timedelta(seconds=30))

    worker = threading.Thread(target=worker_joins)
    worker.start()
    group.connect(2, 30, lambda: None)
    worker.join(30)
    assert "pg" in joined and group.device.type == "cuda"
    with pytest.raises(
        WeightTransferError, match="No backend type associated with device type cpu"
    ):
        group.broadcast(torch.zeros(3), 5, lambda: None)


def test_a_join_is_abandoned_as_soon_as_a_server_says_no():
    t0 = time.monotonic()
    with pytest.raises(WeightTransferError, match="abandoned: the server said no"):
        _join("joining", lambda: time.sleep(30), 60, lambda: "the server said no")
    assert time.monotonic() - t0 < 5


@pytest.mark.slow  # a torchrun trainer run (~60-200 s on a loaded 2-core machine)
@pytest.mark.timeout(2 * TRAINER_RUN_TIMEOUT_S)
def test_fsdp_ranks_gather_and_rank_0_broadcasts_each_step(
    run_api, tiny_model, tmp_path, fake_server
):
    """The trainer as a user runs it: 2 FSDP ranks (gloo), ``--weight-refresh nccl`` after every step.
    The worker ends with exactly the weights of the step-2 checkpoint, and each step's row carries the
    transfer and the version the server reports."""
    from safetensors.torch import load_file

    server = fake_server("ok")
    api = run_api("--store", "memory")
    post_groups(api.url, scripted_groups(4, seed=2))
    save = tmp_path / "trainer"
    cmd = trainer_cmd(
        tiny_model,
        api.url,
        save,
        2,
        "--parallel",
        "fsdp",
        "--weight-refresh",
        "nccl",
        "--transfer-backend",
        "atropos_gloo",
        "--inference-urls",
        server.url,
        "--vllm-restart-interval",
        "1",
        "--checkpoint-interval",
        "1",
    )
    cmd = [cmd[0], "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *cmd[1:]]
    log = tmp_path / "trainer.log"
    proc = start(cmd, log)
    try:
        assert proc.wait(TRAINER_RUN_TIMEOUT_S) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    rows = read_jsonl(save / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert [(r["transfer_fallback"], r["weights_version"]) for r in rows] == [(0, "1"), (0, "2")]
    assert all(r["transfer_mib"] > 0 and r["transfer_s"] > 0 for r in rows)
    got = server.received()
    want = load_file(str(save / "checkpoints" / "step_0000002" / "model.safetensors"))
    assert got["version"] == "2" and sorted(got["weights"]) == sorted(want)
    for name, t in want.items():
        assert torch.equal(got["weights"][name], t), name

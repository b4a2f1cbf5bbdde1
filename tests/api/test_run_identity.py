"""Resuming vs starting over: the same ``run-api`` command brings a SIGKILLed server back with its
undelivered groups and starts a drained one afresh; ``--resume`` / ``--fresh`` force either; a
different run's ``/register`` is never fed the old run's groups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from atroposlib.utils.net import free_port, wait_for_http
from tests.api.api_helpers import group, registration


def _leave_a_run(run_api):
    api = run_api("--store", "sqlite")
    h = httpx.Client(base_url=api.url, timeout=10)
    assert h.post("/register", json=registration(batch_size=4)).status_code == 200
    assert h.post("/scored_data", json=group(2)).status_code == 200
    api.stop()
    return api


class SameCommand:
    """One ``run-api`` command line (a relative ``--data-dir``, as a supervisor script would
    write it), started again and again from the same directory; its output goes to ``log``."""

    def __init__(self, cwd: Path) -> None:
        self.cwd, self.port = cwd, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "atroposlib.cli.run_api", "--port", str(self.port)]
        self.argv += ["--data-dir", "run-data"]
        self.log = cwd / "run-api.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start it; the lines it printed up to answering ``/health``."""
        self.log.write_text("")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=out, stderr=out)
        wait_for_http(self.url + "/health", timeout=60, proc=self.proc)
        return self.log.read_text()

    def kill_9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)


def _start_line(output: str) -> str:
    (line,) = [
        x for x in output.splitlines() if x.startswith("run-api: ") and "serving on" not in x
    ]
    return line


def test_the_same_command_after_kill_9_resumes_and_the_groups_come_out(tmp_path):
    cmd = SameCommand(tmp_path)
    try:
        first = cmd.start()
        assert f"starting a new run in {tmp_path / 'run-data'}" in first  # absolute path
        h = httpx.Client(base_url=cmd.url, timeout=10)
        assert h.post("/register", json=registration(batch_size=4, run_id="exp-1")).is_success
        for i in range(3):
            assert h.post("/scored_data", json=group(2, seed=i, group_id=f"g{i}")).is_success
        held = h.get("/batch").json()  # g0 + g1 handed out, never acknowledged; g2 queued
        assert [g["group_id"] for g in held["batch"]] == ["g0", "g1"]
        cmd.kill_9()

        again = cmd.start()  # the same command, nothing added
        line = _start_line(again)
        assert line.startswith(f"run-api: resuming the run in {tmp_path / 'run-data'}: ")
        assert "1 group queued" in line and "a batch of 2 groups pending ack" in line
        assert "0 envs" in line and "exp-1" in line
        assert "restored run" not in again and "Traceback" not in again, again
        # a trainer of another run is refused and told how to start over
        r = h.post("/register", json=registration(batch_size=4, run_id="exp-2"))
        assert r.status_code == 409 and "--fresh" in r.json()["error"]
        # the run's own trainer gets its unacknowledged batch again, then the queued group
        assert h.post("/register", json=registration(batch_size=4, run_id="exp-1")).is_success
        again_batch = h.get("/batch", headers={"X-Atropos-Ack": "explicit"}).json()
        assert again_batch["batch_id"] == held["batch_id"]
        assert h.post("/batch/ack", json={"batch_id": held["batch_id"]}).is_success
        assert h.post("/scored_data", json=group(2, seed=3, group_id="g3")).is_success
        rest = h.get("/batch", headers={"X-Atropos-Ack": "explicit"}).json()
        assert [g["group_id"] for g in rest["batch"]] == ["g2", "g3"]
    finally:
        cmd.stop()


def test_the_same_command_on_a_drained_run_starts_a_new_one(tmp_path):
    cmd = SameCommand(tmp_path)
    try:
        cmd.start()
        h = httpx.Client(base_url=cmd.url, timeout=10)
        assert h.post("/register", json=registration(batch_size=4)).is_success
        assert h.post("/scored_data", json=group(2, seed=0)).is_success
        assert h.post("/scored_data", json=group(2, seed=1)).is_success
        b = h.get("/batch", headers={"X-Atropos-Ack": "explicit"}).json()
        assert h.post("/batch/ack", json={"batch_id": b["batch_id"]}).is_success
        cmd.kill_9()

        line = _start_line(cmd.start())
        assert line.startswith(f"run-api: starting a new run in {tmp_path / 'run-data'}: ")
        assert "nothing left to deliver" in line and "step 1" in line
        status = h.get("/status").json()
        assert status["registered"] is False and status["current_step"] == 0
        # a new experiment with other settings registers as the run's first trainer
        assert h.post("/register", json=registration(batch_size=8, wandb_group="new")).is_success
        assert h.get("/info").json()["batch_size"] == 8
    finally:
        cmd.stop()


def test_resume_keeps_and_fresh_discards(run_api):
    api = _leave_a_run(run_api)
    resumed = run_api("--store", "sqlite", "--resume", data_dir=api.data_dir, port=api.port)
    assert httpx.get(resumed.url + "/status").json()["queue_size"] == 1
    assert "resuming the run in" in resumed.log()
    resumed.stop()
    fresh = run_api("--store", "sqlite", "--fresh", data_dir=api.data_dir, port=api.port)
    status = httpx.get(fresh.url + "/status").json()
    assert status["queue_size"] == 0 and status["registered"] is False
    assert "discarded the run held in" in fresh.log()


def test_resume_keeps_even_a_drained_run(run_api):
    api = run_api("--store", "sqlite")
    h = httpx.Client(base_url=api.url, timeout=10)
    assert h.post("/register", json=registration(batch_size=2, run_id="long")).is_success
    assert h.post("/scored_data", json=group(2)).is_success
    assert h.get("/batch").json()["batch"]
    assert h.get("/batch").json()["batch"] is None  # implicit ack: nothing left to deliver
    api.kill()
    resumed = run_api("--store", "sqlite", "--resume", data_dir=api.data_dir, port=api.port)
    status = httpx.get(resumed.url + "/status").json()
    assert status["registered"] is True and status["current_step"] == 1
    assert "resuming the run in" in resumed.log() and "0 groups queued" in resumed.log()


def test_a_different_run_is_not_fed_the_old_runs_groups(make_client):
    c = make_client()
    assert c.post("/register", json=registration(batch_size=2, run_id="exp-1")).status_code == 200
    assert c.post("/scored_data", json=group(2)).status_code == 200
    r = c.post("/register", json=registration(batch_size=2, run_id="exp-2"))
    assert r.status_code == 409 and "exp-1" in r.json()["error"]
    # the same run re-registering (a trainer restart) is fine and gets its data
    assert c.post("/register", json=registration(batch_size=2, run_id="exp-1")).status_code == 200
    assert c.get("/batch").json()["batch"]


def test_without_run_ids_the_wandb_names_and_batch_shape_identify_the_run(make_client):
    c = make_client()
    c.post("/register", json=registration(batch_size=2, wandb_group="old"))
    # nothing undelivered: Atropos's first-/register-wins (the held registration stays)
    assert (
        c.post("/register", json=registration(batch_size=4, wandb_group="new")).status_code == 200
    )
    assert c.get("/info").json()["batch_size"] == 2
    c.post("/scored_data", json=group(2))
    assert c.post("/register", json=registration(batch_size=2, wandb_group="x")).status_code == 409
    assert (
        c.post("/register", json=registration(batch_size=2, wandb_group="old")).status_code == 200
    )

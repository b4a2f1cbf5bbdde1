"""Starting over vs resuming is explicit: ``run-api --resume`` / ``--fresh`` on a data directory
that holds a run, and a different run's ``/register`` is never fed the old run's groups."""

from __future__ import annotations

import subprocess
import sys

import httpx

from atroposlib.utils.net import free_port
from tests.api.api_helpers import group, registration


def _leave_a_run(run_api):
    api = run_api("--store", "sqlite")
    h = httpx.Client(base_url=api.url, timeout=10)
    assert h.post("/register", json=registration(batch_size=4)).status_code == 200
    assert h.post("/scored_data", json=group(2)).status_code == 200
    api.stop()
    return api


def test_restart_without_a_choice_refuses_and_names_both_flags(run_api):
    api = _leave_a_run(run_api)
    r = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.run_api", "--port", str(free_port())]
        + ["--data-dir", str(api.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("run-api: error:") and "Traceback" not in r.stderr
    assert "1 queued group(s)" in last and "--resume" in last and "--fresh" in last


def test_resume_keeps_and_fresh_discards(run_api):
    api = _leave_a_run(run_api)
    resumed = run_api("--store", "sqlite", "--resume", data_dir=api.data_dir, port=api.port)
    assert httpx.get(resumed.url + "/status").json()["queue_size"] == 1
    assert "resuming the run in" in resumed.log()
    resumed.stop()
    fresh = run_api("--store", "sqlite", "--fresh", data_dir=api.data_dir, port=api.port)
    status = httpx.get(fresh.url + "/status").json()
    assert status["queue_size"] == 0 and status["registered"] is False
    assert "discarded the earlier run" in fresh.log()


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

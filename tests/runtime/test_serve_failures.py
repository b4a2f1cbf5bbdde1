"""`serve` as a subprocess against a real `run-api`: permanent errors end it with one line, failing
rollouts back off and are summarised by cause, drops are aggregated, and a progress line shows up."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from atroposlib.testing import FakeOpenAIServer
from atroposlib.utils.net import free_port
from tests.envs.helpers import FakeTrainer, start_env, wait_until

BROKEN_ENV = Path(__file__).with_name("broken_env.py")


def _args(api_url: str, fake_url: str, tok_dir: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        "--env.rollout_server_url",
        api_url,
        "--openai.base_url",
        fake_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.spool_dir",
        str(tmp / "spool"),
        "--env.total_steps",
        "1000",
        *extra,
    ]


def _error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("error: ")]


def _stop(proc) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_stops_with_one_line_on_an_unknown_model(run_api, tok_dir, tmp_path):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=1000)
    trainer.start()
    log = tmp_path / "env.log"
    with FakeOpenAIServer(tokenizer=tok_dir, model="served", strict_model=True) as fake:
        proc = start_env(
            "serve",
            *_args(api.url, fake.base_url, tok_dir, tmp_path, "--openai.model_name", "nope"),
            log=log,
        )
        try:
            rc = proc.wait(90)
        finally:
            _stop(proc)
            trainer.halt.set()
        asked = len(fake.requests)
    text = log.read_text()
    assert rc == 1, text[-3000:]
    errors = _error_lines(text)
    assert len(errors) == 1 and "404" in errors[0] and "--openai.model_name" in errors[0], errors
    assert "Traceback" not in text and asked < 20
    assert len(text.splitlines()) < 40, text[-3000:]


def test_serve_ends_when_the_api_never_answers(tok_dir, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    log = tmp_path / "env.log"
    proc = start_env(
        "serve",
        *_args(url, "http://127.0.0.1:9/v1", tok_dir, tmp_path, "--env.unreachable_timeout", "2"),
        log=log,
    )
    try:
        rc = proc.wait(60)
    finally:
        _stop(proc)
    text = log.read_text()
    assert rc == 1, text[-3000:]
    errors = _error_lines(text)
    assert len(errors) == 1 and url in errors[0] and "--env.rollout_server_url" in errors[0]
    assert "Traceback" not in text


def test_serve_backs_off_when_every_rollout_fails(run_api, fake_server, tok_dir, tmp_path):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=1000)
    trainer.start()
    log = tmp_path / "env.log"
    proc = start_env(
        "serve",
        *_args(api.url, fake_server.base_url, tok_dir, tmp_path, "--env.progress_interval", "2"),
        log=log,
        env_file=BROKEN_ENV,
    )
    try:
        wait_until(lambda: "Taxi-v3" in log.read_text(), 60, "the first failure", proc)
        time.sleep(8)
        rc = _stop(proc)
    finally:
        trainer.halt.set()
    text = log.read_text()
    assert rc == 0, text[-3000:]  # stopped by the signal, as asked
    assert text.count("Traceback") == 1, text[-3000:]  # the first failure of its kind only
    # backoff: a handful of attempts in ~8 s, not thousands
    summary = [line for line in text.splitlines() if "rollouts so far" in line][-1]
    failed = int(summary.split("ok, ")[1].split(" failed")[0])
    assert 2 <= failed <= 20, summary
    assert "hook error: ValueError: Environment `Taxi-v3` doesn't exist." in summary
    assert len(text.splitlines()) < 60, text[-3000:]
    assert "serve: groups of 4 until trainer step 1000" in text  # the banner
    progress = [line for line in text.splitlines() if "serve: " in line]
    assert progress and "0 groups sent" in progress[-1] and "failed (hook error" in progress[-1]


def test_serve_aggregates_drops_and_prints_progress(run_api, tok_dir, tmp_path):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=1000)
    trainer.start()
    log = tmp_path / "env.log"
    # every completion is the same: every group has equal scores and, as asked, is dropped
    with FakeOpenAIServer(tokenizer=tok_dir, responses=["same"]) as fake:
        proc = start_env(
            "serve",
            *_args(
                api.url,
                fake.base_url,
                tok_dir,
                tmp_path,
                "--env.progress_interval",
                "1",
                "--env.ensure_scores_are_not_same",
                "true",
            ),
            log=log,
        )
        try:
            wait_until(
                lambda: "same_scores:" in log.read_text() and log.read_text().count("serve: ") >= 2,
                90,
                "two progress lines with drops",
                proc,
            )
            rc = _stop(proc)
        finally:
            trainer.halt.set()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert text.count("dropping a group whose scores are all") == 1, text[-3000:]
    last = [line for line in text.splitlines() if "serve: " in line][-1]
    dropped = int(last.split("dropped (same_scores: ")[1].split(")")[0])
    assert dropped >= 2 and "policy v" in last and "API queue" in last, last

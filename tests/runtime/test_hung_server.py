"""An inference server that accepts connections and never answers ends ``process`` and ``serve``
within ``--env.unreachable_timeout`` (plus one health probe), with one line naming the server and
the timeout, exactly as one that refuses connections does; a slow server that answers is waited for.

Real subprocesses against a real listening socket that holds every connection without a byte back
(``SilentServer``), and for ``serve`` a real ``run-api`` with a trainer stand-in.
"""

from __future__ import annotations

import time

from atroposlib.testing import FakeOpenAIServer, SilentServer
from tests.envs.helpers import FakeTrainer, run_env, start_env
from tests.jsonl import read_jsonl

TIMEOUT = 3


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


def _check_one_line(text: str, url: str) -> None:
    errors = _error_lines(text)
    assert len(errors) == 1, text[-3000:]
    assert url in errors[0] and f"{TIMEOUT}s" in errors[0], errors
    assert "--env.unreachable_timeout" in errors[0] and "Traceback" not in text


def test_process_ends_when_the_server_never_answers(tok_dir, tmp_path):
    with SilentServer() as silent:
        t0 = time.monotonic()
        r = run_env(
            "process",
            "--openai.base_url",
            silent.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.total_steps",
            "4",
            "--env.data_path_to_save_groups",
            str(tmp_path / "g.jsonl"),
            "--env.unreachable_timeout",
            str(TIMEOUT),
            cwd=tmp_path,
            timeout=90,
        )
        took = time.monotonic() - t0
        accepted = silent.accepted
    assert r.returncode == 1, r.stderr[-3000:]
    assert accepted >= 1  # it did connect: the server was there, and silent
    _check_one_line(r.stderr, silent.base_url)
    # start-up (~5 s) + the timeout + one health probe (5 s), not the 20-minute request timeout
    assert took < 45, took


def test_serve_ends_when_the_server_never_answers(run_api, tok_dir, tmp_path):
    api = run_api()
    trainer = FakeTrainer(api.url, batch_size=8, num_steps=1000)
    trainer.start()
    log = tmp_path / "env.log"
    with SilentServer() as silent:
        proc = start_env(
            "serve",
            "--env.rollout_server_url",
            api.url,
            "--openai.base_url",
            silent.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.spool_dir",
            str(tmp_path / "spool"),
            "--env.total_steps",
            "1000",
            "--env.unreachable_timeout",
            str(TIMEOUT),
            log=log,
        )
        t0 = time.monotonic()
        try:
            rc = proc.wait(90)
        finally:
            if proc.poll() is None:
                proc.kill()
            trainer.halt.set()
        took = time.monotonic() - t0
    text = log.read_text()
    assert rc == 1, text[-3000:]
    _check_one_line(text, silent.base_url)
    assert took < 45, took


def test_a_slow_server_that_answers_is_waited_for(tok_dir, tmp_path):
    def slow(prompt_text: str, body: dict) -> str:
        if body["choice_index"] == 0:
            time.sleep(2.5)  # the answer takes longer than the unreachable timeout
        return "The answer is 7."

    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        r = run_env(
            "process",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.total_steps",
            "1",
            "--env.data_path_to_save_groups",
            str(out),
            "--env.unreachable_timeout",
            "1",
            cwd=tmp_path,
            timeout=90,
        )
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(read_jsonl(out)) == 1 and "Traceback" not in r.stderr

"""Commands that cannot do their job say so: one line, a non-zero exit, failures counted by cause.

Real subprocesses against a real (fake-model) OpenAI-compatible HTTP server, as in the other env
tests: a model name the server does not have (404), an inference URL nothing listens on, an env whose
hook raises on every item. Plus the ``FailureTracker`` rules themselves.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from atroposlib.errors import InferenceRejected, InferenceUnavailable
from atroposlib.runtime.failures import FailureTracker, cause_of
from atroposlib.testing import FakeOpenAIServer
from atroposlib.utils.net import free_port
from tests.envs.helpers import run_env, start_env, wait_until
from tests.jsonl import read_jsonl

BROKEN_ENV = Path(__file__).with_name("broken_env.py")


def _process_args(base_url: str, tok_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--openai.base_url",
        base_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.total_steps",
        "6",
        "--env.data_path_to_save_groups",
        str(out),
        *extra,
    ]


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_process_stops_at_once_on_an_unknown_model(tok_dir, tmp_path):
    with FakeOpenAIServer(tokenizer=tok_dir, model="served", strict_model=True) as fake:
        t0 = time.monotonic()
        r = run_env(
            "process",
            *_process_args(fake.base_url, tok_dir, tmp_path / "g.jsonl"),
            "--openai.model_name",
            "not-served",
            cwd=tmp_path,
        )
        took = time.monotonic() - t0
        asked = len(fake.requests)
    assert r.returncode == 1, r.stderr[-2000:]
    errors = _error_lines(r.stderr)
    assert len(errors) == 1 and "404" in errors[0] and "--openai.model_name" in errors[0], errors
    assert "Traceback" not in r.stderr, r.stderr
    assert asked <= 4 and took < 60  # no retries of a request that cannot succeed


def test_process_gives_up_on_an_unreachable_server_after_the_deadline(tok_dir, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    r = run_env(
        "process",
        *_process_args(url, tok_dir, tmp_path / "g.jsonl", "--env.unreachable_timeout", "3"),
        cwd=tmp_path,
        timeout=90,
    )
    assert r.returncode == 1, r.stderr[-2000:]
    errors = _error_lines(r.stderr)
    assert len(errors) == 1 and url in errors[0] and "--openai.base_url" in errors[0], errors
    assert "connection refused" in errors[0], errors
    assert "Traceback" not in r.stderr, r.stderr
    # said at once: which server, why, and how long the run keeps trying
    first = f"inference server {url}: connection refused; waiting for it to answer, up to 3s"
    assert r.stderr.count(first) == 1, r.stderr[-3000:]
    # the closing summary accounts for every attempt
    summary = next(line for line in r.stderr.splitlines() if "process: no group written" in line)
    attempts = int(summary.split("; ")[1].split(" attempt(s)")[0])
    counted = [int(n) for n in re.findall(r"(\d+) (?:failed|gave no group|abandoned)", summary)]
    assert attempts >= 1 and sum(counted) == attempts, summary


def test_process_waits_for_a_server_that_is_still_starting(tok_dir, tmp_path):
    """Connections refused for a while (a server loading its model), then answers: the run says
    what it waits for at once, keeps saying it, and carries on when the server is up."""
    port = free_port()
    log = tmp_path / "env.log"
    proc = start_env(
        "process",
        *_process_args(
            f"http://127.0.0.1:{port}/v1",
            tok_dir,
            tmp_path / "g.jsonl",
            "--env.progress_interval",
            "1",
            "--env.unreachable_timeout",
            "120",
        ),
        log=log,
    )
    fake = FakeOpenAIServer(tokenizer=tok_dir, port=port, responses=["7", "8"])
    try:
        wait_until(lambda: "waiting for it to answer" in log.read_text(), 120, "the wait", proc)
        wait_until(lambda: "still waiting" in log.read_text(), 60, "a progress line", proc)
        fake.start()
        rc = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
        fake.stop()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert len(read_jsonl(tmp_path / "g.jsonl")) == 6
    assert text.count("connection refused; waiting for it to answer, up to 120s") == 1, text
    assert re.search(r"inference server http://127\.0\.0\.1:\d+/v1 answered after \d+s", text)
    assert "Traceback" not in text and not _error_lines(text), text[-3000:]


def test_process_with_a_hook_failing_on_every_item_exits_non_zero(fake_server, tok_dir, tmp_path):
    r = run_env(
        "process",
        *_process_args(fake_server.base_url, tok_dir, tmp_path / "g.jsonl"),
        cwd=tmp_path,
        env_file=BROKEN_ENV,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr[-2000:]
    errors = _error_lines(r.stderr)
    assert len(errors) == 1, errors
    assert "Taxi-v3" in errors[0] and "hook error: ValueError" in errors[0], errors
    # the first failure shows where it came from; later ones are counted, not dumped
    assert r.stderr.count("Traceback") == 1, r.stderr[-3000:]
    assert not (tmp_path / "g.jsonl").exists() and not (tmp_path / "g.html").exists()


def test_tracker_counts_by_cause_backs_off_and_resets():
    t = FailureTracker("rollout", base_delay=0.5, max_delay=4.0)
    for _ in range(5):
        v = t.failure(ValueError("bad item"))
        assert v.fatal is None and v.cause.startswith("hook error: ValueError: bad item")
    t.failure(InferenceRejected(400, "inference server x answered 400: too long"))
    assert t.delay() == 4.0 and not t.ready()  # 0.5 * 2**5 capped
    assert t.summary().startswith("6 failed (hook error: ValueError: bad item")
    assert "inference server answered 400: 1" in t.summary()
    t.success()
    assert t.delay() == 0.0 and t.ready()


def test_tracker_fatal_rules():
    t = FailureTracker()
    assert t.failure(InferenceRejected(404, "no such model")).fatal == "no such model"
    assert t.failure(InferenceRejected(401, "bad key")).fatal == "bad key"
    assert t.failure(InferenceRejected(400, "bad request")).fatal is None
    down = InferenceUnavailable("no inference server answered within 3s")
    assert t.failure(down, ever_answered=True).fatal is None  # an outage of a server that worked
    assert "never answered" in t.failure(down, ever_answered=False).fatal
    assert cause_of(down) == "inference server unreachable"
    slow = InferenceUnavailable("no inference server answered within 3s (...)", slow=True)
    verdict = t.failure(slow, ever_answered=False).fatal
    assert verdict.endswith("no request was answered in time") and "never answered" not in verdict


def test_urls_that_cannot_work_are_start_up_errors(tok_dir, tmp_path):
    cases = [
        ("serve", "--env.rollout_server_url", "localhost:8000", "must start with http://"),
        ("process", "--openai.base_url", "http://no-such-host.invalid/v1", "does not exist"),
    ]
    for sub, flag, value, needle in cases:
        args = ["--env.tokenizer_name", str(tok_dir), flag, value]
        if sub == "process":
            args += ["--env.data_path_to_save_groups", str(tmp_path / "g.jsonl")]
        t0 = time.monotonic()
        r = run_env(sub, *args, cwd=tmp_path, timeout=60)
        assert r.returncode == 2, (sub, r.stderr[-2000:])
        errors = _error_lines(r.stderr)
        assert len(errors) == 1 and flag in errors[0] and needle in errors[0], errors
        assert "Traceback" not in r.stderr and time.monotonic() - t0 < 30


def test_banner_says_what_total_steps_means_for_each_command():
    from atroposlib.runtime.cli import banner

    assert banner("process", 6, 4) == "6 group(s) of 4"
    assert banner("serve", 20, 8) == "groups of 8 until trainer step 20"
    assert banner("serve", -1, 8) == "groups of 8 until the trainer's num_steps"


NO_EVAL_ENV = Path(__file__).with_name("no_eval_env.py")


def _evaluate(fake_server, tok_dir, tmp_path, env_file):
    return run_env(
        "evaluate",
        "--openai.base_url",
        fake_server.base_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.data_dir_to_save_evals",
        str(tmp_path / "evals"),
        cwd=tmp_path,
        env_file=env_file,
    )


def test_evaluate_without_an_evaluation_says_so(fake_server, tok_dir, tmp_path):
    r = _evaluate(fake_server, tok_dir, tmp_path, NO_EVAL_ENV)
    assert r.returncode == 1, r.stderr[-2000:]
    assert _error_lines(r.stderr) == [
        "error: NoEvalEnv defines no evaluate(): it has no evaluation to run"
    ]
    assert "saved" not in r.stderr + r.stdout and not (tmp_path / "evals").exists()


def test_evaluate_that_raises_exits_non_zero_with_one_line(fake_server, tok_dir, tmp_path):
    r = _evaluate(fake_server, tok_dir, tmp_path, BROKEN_ENV)
    assert r.returncode == 1, r.stderr[-2000:]
    (line,) = _error_lines(r.stderr)
    assert line.startswith("error: BrokenEnv.evaluate() failed: ValueError: Environment `Taxi-v3`")
    assert "broken_env.py:" in line and "Traceback" not in r.stderr
    assert not (tmp_path / "evals" / "metrics.json").exists()


def test_eval_results_keep_json_types(tmp_path):
    import json
    from types import SimpleNamespace

    import numpy as np

    from atroposlib.runtime.context import RunContext
    from atroposlib.runtime.eval_results import EvalRun
    from atroposlib.runtime.evaluation import write_eval_results

    env = SimpleNamespace(
        name="t",
        config=SimpleNamespace(data_dir_to_save_evals=str(tmp_path), max_token_length=64),
        server=SimpleNamespace(servers=[]),
        context=RunContext(),
    )
    samples = [{"correct": np.bool_(False), "score": np.float32(0.5), "ids": np.array([1, 2])}]
    write_eval_results(env, EvalRun({"acc": np.float64(0.25)}, samples=samples), verbose=False)
    (sample,) = read_jsonl(tmp_path / "samples.jsonl")
    assert sample == {"correct": False, "score": 0.5, "ids": [1, 2]}
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["results"]["all"] == {"acc": 0.25} and env.context.eval_logged


def test_evaluate_shows_progress_while_it_runs(tok_dir, tmp_path):
    def slow(prompt_text, body):
        time.sleep(0.5)
        return "7"

    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        r = run_env(
            "evaluate",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.progress_interval",
            "0.4",
            cwd=tmp_path,
        )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "inference request(s) answered" in r.stderr, r.stderr[-2000:]

"""`process` and `evaluate` run as subprocesses against a fake inference server."""

from __future__ import annotations

import json
import signal
import time

from atroposlib.testing import FakeOpenAIServer
from atroposlib.type_definitions import validate_group
from tests.envs.helpers import run_env, start_env, wait_until

EVIL = "<script>alert('x')</script> 7"


def _lines(path):
    return (
        [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    )


def test_process_writes_groups_and_an_escaped_report(tok_dir, tmp_path):
    texts = ["The answer is 7.", EVIL, "It is 12", "no idea"]

    def slowish(prompt_text, body):
        time.sleep(0.05)
        return texts[body["choice_index"] % 4]

    with FakeOpenAIServer(tokenizer=tok_dir, responder=slowish) as fake:
        r = run_env(
            "process",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.total_steps",
            "5",
            "--env.group_size",
            "4",
            "--env.max_num_workers",
            "3",
            "--env.data_path_to_save_groups",
            str(tmp_path / "out" / "g.jsonl"),
            cwd=tmp_path,
        )
        concurrent = fake.max_in_flight
    assert r.returncode == 0, r.stderr[-2000:]
    groups = _lines(tmp_path / "out" / "g.jsonl")
    assert (
        len(groups) == 5 and 2 <= concurrent <= 3
    )  # items ran concurrently, bounded by max_num_workers
    for g in groups:
        validate_group(g)
        assert len(g["tokens"]) == 4 and g["messages"][1][-1]["content"] == EVIL
        assert "policy_version" not in g  # process trains nothing
    html = (tmp_path / "out" / "g.html").read_text()
    assert "<script>alert(" not in html and "&lt;script&gt;" in html
    assert html.count('<span class="pill">addition_test</span>') == 5 and "unknown env" not in html
    assert "mean_score" in r.stderr and "5/5" in r.stderr  # the progress bar


def test_process_ctrl_c_leaves_valid_jsonl_and_report(tok_dir, tmp_path):
    def slow(prompt_text, body):
        time.sleep(0.2)
        return ["yes 7", "no"][body["choice_index"] % 2]

    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=slow) as fake:
        proc = start_env(
            "process",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.total_steps",
            "500",
            "--env.max_num_workers",
            "2",
            "--env.data_path_to_save_groups",
            str(out),
            log=tmp_path / "env.log",
        )
        try:
            wait_until(lambda: len(_lines(out)) >= 2, 60, "two groups", proc)
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == 0, (tmp_path / "env.log").read_text()[-2000:]
    groups = _lines(out)
    assert 2 <= len(groups) < 500
    for g in groups:
        validate_group(g)
    assert (tmp_path / "g.html").exists()


def test_evaluate_writes_metrics_and_prints_a_table(fake_server, tok_dir, tmp_path):
    r = run_env(
        "evaluate",
        "--openai.base_url",
        fake_server.base_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.data_dir_to_save_evals",
        str(tmp_path / "evals"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    metrics = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    value = metrics["results"]["all"]["eval/percent_correct"]
    assert 0.0 <= value <= 1.0
    assert "atropos|addition_test_eval|0" in metrics["results"]
    assert "| eval/percent_correct |" in r.stdout
    assert all(q.get("n") == 1 for q in fake_server.requests)
    # the model the server answered as (not the config's "tiny") and the max_tokens really asked for
    general = metrics["config_general"]
    assert general["model_name"] == "fake-model"
    assert general["generation_parameters"]["max_new_tokens"] == 16

"""`process` and `evaluate` run as subprocesses against a fake inference server."""

from __future__ import annotations

import json
import signal
import time

from atroposlib.testing import FakeOpenAIServer
from atroposlib.type_definitions import validate_group
from tests.envs.helpers import REPO_ROOT, run_env, start_env, wait_until
from tests.jsonl import read_jsonl

EVIL = "<script>alert('x')</script> 7"


def _lines(path):
    return read_jsonl(path)


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


GSM8K = REPO_ROOT / "environments" / "gsm8k_server.py"


def _gsm8k_prompts(tok_dir, monkeypatch, n: int) -> list[tuple[str, str, int]]:
    """(question, answer, prompt tokens) of the first ``n`` offline GSM8K test problems."""
    monkeypatch.syspath_prepend(str(GSM8K.parent))
    from gsm8k_server import ANSWER_FORMAT
    from transformers import AutoTokenizer

    from atroposlib.envkit.chat import chat, system_prompt
    from atroposlib.envkit.data_sources import load_gsm8k

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    out = []
    for row in load_gsm8k("sample", "test", size=n).rows[:n]:
        messages = chat(system_prompt(ANSWER_FORMAT), row["question"])
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_tokens = len(tok.encode(rendered, add_special_tokens=False))
        out.append((row["question"], row["answer"], prompt_tokens))
    return out


def _gsm8k_evaluate(fake, tok_dir, tmp_path, max_token_length: int):
    return run_env(
        "evaluate",
        "--openai.base_url",
        fake.base_url,
        "--openai.server_type",
        "vllm",
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.data_source",
        "sample",
        "--env.eval_size",
        "6",
        "--env.max_eval_workers",
        "1",
        "--env.max_token_length",
        str(max_token_length),
        "--env.progress_interval",
        "0.3",
        "--env.data_dir_to_save_evals",
        str(tmp_path / "evals"),
        cwd=tmp_path,
        env_file=GSM8K,
    )


def test_evaluate_skips_a_prompt_longer_than_max_token_length(tok_dir, tmp_path, monkeypatch):
    problems = _gsm8k_prompts(tok_dir, monkeypatch, 6)
    lengths = sorted(length for _, _, length in problems)
    # the longest prompt leaves 4 tokens (fewer than the 8 an answer needs); the others fit
    assert lengths[-2] + 8 <= lengths[-1] + 4
    too_long = next(q for q, _, length in problems if length == lengths[-1])
    gold = {q: a for q, a, _ in problems}

    def right(prompt_text: str, body: dict) -> str:
        time.sleep(0.2)
        return "\\boxed{" + next(a for q, a in gold.items() if q in prompt_text) + "}"

    with FakeOpenAIServer(tokenizer=tok_dir, responder=right) as fake:
        r = _gsm8k_evaluate(fake, tok_dir, tmp_path, lengths[-1] + 4)
        asked = [body["messages"][-1]["content"] for body in fake.requests]
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(asked) == 5 and too_long not in asked  # the long one is never sent
    metrics = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    assert metrics["results"]["all"] == {"eval/percent_correct": 1.0}  # of the 5 evaluated
    assert metrics["config_general"]["eval_items"] == {
        "total": 6,
        "evaluated": 5,
        "skipped": 1,
        "skipped_by_reason": {"prompt longer than max_token_length": 1},
    }
    samples = _lines(tmp_path / "evals" / "samples.jsonl")
    assert len(samples) == 5 and too_long not in [s["question"] for s in samples]
    log = r.stderr.strip().splitlines()
    summary = "5 of 6 item(s) evaluated, 1 skipped (prompt longer than max_token_length: 1)"
    assert summary in log[-1], log[-3:]
    assert r.stderr.count("skipping an item") == 1 and "Traceback" not in r.stderr
    progress = [line for line in log if "inference request(s) answered" in line]
    assert progress and all("/6 item(s)" in line for line in progress), progress


def test_evaluate_with_every_prompt_too_long_fails_with_one_line(tok_dir, tmp_path, monkeypatch):
    shortest = min(length for _, _, length in _gsm8k_prompts(tok_dir, monkeypatch, 6))
    with FakeOpenAIServer(tokenizer=tok_dir) as fake:
        r = _gsm8k_evaluate(fake, tok_dir, tmp_path, shortest)
        asked = len(fake.requests)
    assert r.returncode == 1, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: evaluate: no item could be evaluated: 0 of 6 item(s) evaluated, 6 skipped "
        "(prompt longer than max_token_length: 6); raise --env.max_token_length"
    ]
    assert asked == 0 and not (tmp_path / "evals" / "metrics.json").exists()


def test_a_server_saying_the_prompt_exceeds_its_context_is_a_skip_too():
    from atroposlib.errors import InferenceRejected, PromptTooLong
    from atroposlib.runtime.eval_items import SKIP_PROMPT_TOO_LONG, skip_reason

    vllm = "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens"
    assert skip_reason(InferenceRejected(400, vllm)) == SKIP_PROMPT_TOO_LONG
    assert skip_reason(PromptTooLong("the prompt is 395 tokens")) == SKIP_PROMPT_TOO_LONG
    assert skip_reason(InferenceRejected(400, "bad temperature")) is None
    assert skip_reason(InferenceRejected(404, "no model; context length")) is None
    assert skip_reason(ValueError("a bug")) is None


def test_process_keeps_all_equal_groups_by_default_and_drops_them_when_asked(tok_dir, tmp_path):
    """The rule serve follows too: all-equal groups are kept and counted unless
    ``--env.ensure_scores_are_not_same true``; then each drop is counted, only the first logged."""

    def run(*extra):
        return run_env(
            "process",
            "--openai.base_url",
            fake.base_url,
            "--env.tokenizer_name",
            str(tok_dir),
            "--env.total_steps",
            "3",
            "--env.max_num_workers",
            "1",
            "--env.data_path_to_save_groups",
            str(tmp_path / f"g{len(extra)}.jsonl"),
            *extra,
            cwd=tmp_path,
        )

    with FakeOpenAIServer(tokenizer=tok_dir, responses=["same"]) as fake:
        kept = run()
        dropped = run("--env.ensure_scores_are_not_same", "true")
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert len(_lines(tmp_path / "g0.jsonl")) == 3
    assert kept.stderr.count("keeping a group whose scores are all 0.0") == 1, kept.stderr
    assert "3 group(s) written with all-equal scores" in kept.stderr, kept.stderr[-2000:]
    assert dropped.returncode == 1 and not (tmp_path / "g2.jsonl").exists()
    assert dropped.stderr.count("dropping a group whose scores are all 0.0") == 1, dropped.stderr
    error = [line for line in dropped.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "same_scores: " in error[0], dropped.stderr[-2000:]
    assert "all scores equal, with --env.ensure_scores_are_not_same" in error[0], error

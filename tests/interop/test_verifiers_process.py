"""The verifiers env (``python -m atroposlib.interop.verifiers``) on small verifiers v1 tasksets written
for these tests (tests/interop/vf_tasks), with our CPU engine writing the replies: exact tokens and
masks of single- and multi-turn episodes, scores from the tasks' own rubrics, and the mistakes that
end a run with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from atroposlib.utils.tokenize_for_trainer import chat_token_ids
from tests.interop.helpers import trained_runs
from tests.jsonl import read_jsonl

pytest.importorskip(
    "verifiers.v1", reason="verifiers is not installed (scripts/setup_verifiers.sh installs it)"
)

REPO = Path(__file__).resolve().parents[2]
TASKS = "tests.interop.vf_tasks"


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")


def _run(engine, model: Path, *args: str, cmd: str = "process") -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "-m",
        "atroposlib.interop.verifiers",
        cmd,
        *args,
        "--env.tokenizer_name",
        str(model),
        "--openai.base_url",
        engine.url + "/v1",
        "--openai.model_name",
        "tiny",
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=_env(), cwd=REPO)


def test_single_turn_taskset_exact_tokens_and_rubric_scores(
    tiny_engine, tiny_model_dir: Path, tmp_path: Path
):
    from tests.interop.vf_tasks.echo import expected_score

    out = tmp_path / "groups.jsonl"
    r = _run(
        tiny_engine,
        tiny_model_dir,
        "--verifiers.env",
        f"{TASKS}.echo",
        "--verifiers.args",
        '{"n": 2, "word": "digit"}',
        "--verifiers.max_tokens_per_turn",
        "8",
        "--env.group_size",
        "3",
        "--env.total_steps",
        "2",
        "--env.data_path_to_save_groups",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 2
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = set()
    for g in groups:
        assert len(g["tokens"]) == 3
        for tokens, masks, lps, msgs, score in zip(
            g["tokens"],
            g["masks"],
            g["inference_logprobs"],
            g["messages"],
            g["scores"],
            strict=True,
        ):
            system, user, reply, grader = msgs
            assert system == {"role": "system", "content": "Be brief."}
            assert grader["role"] == "grader"
            prompts.add(user["content"])
            answer = user["content"].split()[-1].rstrip(".")
            assert score == expected_score(reply["content"], answer)  # the task's own rubric
            ((a, b),) = trained_runs(masks)  # one trained stretch: the reply
            assert b == len(tokens)
            assert tokens[:a] == chat_token_ids(tok, [system, user], True)  # the exact prompt
            assert masks[a:] == tokens[a:]
            assert tok.decode(tokens[a:], skip_special_tokens=True) == reply["content"]
            assert all(lp <= 0 for lp in lps[a:]) and all(lp == 1.0 for lp in lps[:a])
    assert prompts == {"Say the digit 0.", "Say the digit 1."}  # args reached the taskset


def test_multi_turn_env_feedback_is_in_the_tokens_but_masked(
    tiny_engine, tiny_model_dir: Path, tmp_path: Path
):
    from tests.interop.vf_tasks.count_game import feedback

    out = tmp_path / "groups.jsonl"
    r = _run(
        tiny_engine,
        tiny_model_dir,
        "--verifiers.env",
        f"{TASKS}.count_game",
        "--verifiers.args",
        '{"rounds": 3}',
        "--verifiers.max_tokens_per_turn",
        "6",
        "--env.group_size",
        "2",
        "--env.total_steps",
        "2",
        "--env.data_path_to_save_groups",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 2
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for g in groups:
        for tokens, masks, lps, msgs, score in zip(
            g["tokens"],
            g["masks"],
            g["inference_logprobs"],
            g["messages"],
            g["scores"],
            strict=True,
        ):
            replies = [m["content"] for m in msgs if m["role"] == "assistant"]
            users = [m["content"] for m in msgs if m["role"] == "user"]
            assert len(replies) == 3 and len(users) == 3
            assert users[1:] == [
                feedback(x.strip()) for x in replies[:2]
            ]  # the env's run() wrote them
            # the task's rubric (replies) + the env's own reward (3 turns x weight 0.25)
            assert score == sum((len(x.strip()) % 5) / 4 for x in replies) + 0.75
            runs = trained_runs(masks)
            assert len(runs) == 3, "one trained stretch per turn, the env's feedback masked"
            for (a, b), reply in zip(runs, replies, strict=True):
                assert masks[a:b] == tokens[a:b]
                assert tok.decode(tokens[a:b], skip_special_tokens=True) == reply
                assert all(lp <= 0 for lp in lps[a:b])
            assert tokens[: runs[0][0]] == chat_token_ids(tok, msgs[:1], True)
            between = tok.decode(tokens[runs[0][1] : runs[1][0]], skip_special_tokens=False)
            assert users[1] in between and between.endswith("assistant\n")


def test_evaluate_plays_eval_tasks_at_temperature_zero(
    tiny_engine, tiny_model_dir: Path, tmp_path: Path
):
    r = _run(
        tiny_engine,
        tiny_model_dir,
        "--verifiers.env",
        f"{TASKS}.echo",
        "--verifiers.eval_args",
        '{"n": 3}',
        "--verifiers.eval_tasks",
        "5",
        "--verifiers.max_tokens_per_turn",
        "4",
        "--env.data_dir_to_save_evals",
        str(tmp_path / "evals"),
        cmd="evaluate",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    results = metrics["results"]["all"]
    assert results["eval/dropped_episodes"] == 0 and results["eval/mean_turns"] == 1.0
    assert "eval/mean_reward" in results
    samples = read_jsonl(tmp_path / "evals" / "samples.jsonl")
    assert [s["task"] for s in samples] == [0, 1, 2]  # the eval taskset has 3 tasks


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--verifiers.env", "no-such-taskset"],
            "error: --verifiers.env no-such-taskset: no such taskset (no module 'no_such_taskset'",
        ),
        (
            ["--verifiers.env", f"{TASKS}.echo", "--verifiers.args", "{bad json"],
            "error: invalid value for --verifiers.args",
        ),
        (
            ["--verifiers.env", f"{TASKS}.echo", "--verifiers.args", '{"nn": 1}'],
            "error: --verifiers.args: taskset.nn: Extra inputs are not permitted",
        ),
        (
            ["--verifiers.env", f"{TASKS}.bad_load"],
            f"error: --verifiers.env {TASKS}.bad_load: loading its tasks raised FileNotFoundError",
        ),
        (["--verifiers.env", f"{TASKS}.echo", "--verifiers.args", '{"n": 0}'], "yielded no task"),
        ([], "error: --verifiers.env is required"),
    ],
    ids=["unknown-env", "bad-json", "unknown-arg", "load-error", "no-tasks", "no-env"],
)
def test_mistakes_end_the_run_with_one_line_and_exit_2(
    tiny_engine, tiny_model_dir: Path, tmp_path: Path, args: list[str], line: str
):
    r = _run(
        tiny_engine,
        tiny_model_dir,
        *args,
        "--env.total_steps",
        "1",
        "--env.data_path_to_save_groups",
        str(tmp_path / "g.jsonl"),
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and line in last, last


def test_a_rubric_that_raises_drops_its_episodes_and_counts_them(
    tiny_engine, tiny_model_dir: Path, tmp_path: Path
):
    r = _run(
        tiny_engine,
        tiny_model_dir,
        "--verifiers.env",
        f"{TASKS}.bad_rubric",
        "--verifiers.max_tokens_per_turn",
        "3",
        "--env.group_size",
        "2",
        "--env.total_steps",
        "1",
        "--env.data_path_to_save_groups",
        str(tmp_path / "g.jsonl"),
    )
    assert r.returncode == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    # every episode dropped and counted (11 attempts of 2 episodes), the cause logged once
    assert "dropped: verifiers episode: the task's rubric raised: 22" in r.stderr
    assert r.stderr.count("ZeroDivisionError: the grader divided by zero") == 1

"""Atropos-style env files (``tests/compat/envs``) run unchanged through ``process``.

Each file imports only Atropos's module paths and names; each run is a real subprocess against the
project's fake OpenAI server on loopback, and the groups it writes must be well-formed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from atroposlib.type_definitions import validate_group
from tests.compat.helpers import process_args, run_file
from tests.jsonl import read_jsonl


@pytest.fixture(scope="module")
def tok_dir() -> Path:
    return tiny_tokenizer_dir()


def _check(r, out: Path, n_groups: int, group_size: int) -> list[dict]:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == n_groups, (len(groups), r.stderr[-2000:])
    for g in groups:
        validate_group(g)
        assert len(g["tokens"]) == group_size
    return groups


def test_multi_turn_game_history_env(tok_dir, tmp_path):
    def guesser(prompt_text: str, body: dict) -> str:
        turn = prompt_text.count("No, ")
        return f"<think>{'hmm ' * 8}</think> I guess {3 + turn + body['choice_index']}"

    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=guesser) as fake:
        r = run_file("guess_game_env.py", *process_args(fake.base_url, tok_dir, out), cwd=tmp_path)
        calls = len(fake.requests)
    groups = _check(r, out, n_groups=2, group_size=2)
    assert calls > 4  # several turns per game
    conv = groups[0]["messages"][0]
    assert [m["role"] for m in conv[:2]] == ["system", "user"]
    # the thinking block went back into the next prompt truncated, with the marker
    assert any("<think>\n... " in m["content"] for m in conv if m["role"] == "assistant")


def test_blackjack_env_parses_tool_calls(tok_dir, tmp_path):
    replies = [
        '<tool_call>{"name": "stand", "arguments": {}}</tool_call>',
        "<tool_call>{'name': 'hit', 'arguments': {}}</tool_call>",
        '<tool_call>{"name": "fold", "arguments": {}}</tool_call>',  # not an available tool
        "I stand.",  # no tool call at all
    ]
    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(
        tokenizer=tok_dir, responder=lambda p, b: replies[b["choice_index"] % 4]
    ) as fake:
        r = run_file(
            "blackjack_tool_env.py", *process_args(fake.base_url, tok_dir, out), cwd=tmp_path
        )
    groups = _check(r, out, n_groups=3, group_size=4)
    for g in groups:
        assert g["scores"][2] == -1.0 and g["scores"][3] == -1.0  # invalid calls lose
        assert g["scores"][0] in (0.0, 1.0)  # a valid stand is scored on the hand


def test_combined_reward_dataset_env(tok_dir, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(
        "\n".join(json.dumps({"question": f"{i}+{i}?", "answer": str(2 * i)}) for i in range(3))
    )
    replies = ["<think>ok</think> 4", "4", "<think>x</think> no", "nothing"]
    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(
        tokenizer=tok_dir, responder=lambda p, b: replies[b["choice_index"] % 4]
    ) as fake:
        r = run_file(
            "combined_reward_env.py",
            *process_args(fake.base_url, tok_dir, out, "--env.dataset_path", str(data)),
            cwd=tmp_path,
        )
    groups = _check(r, out, n_groups=3, group_size=4)
    # question "2+2?" (answer 4): contains-answer (weight 1) + r1_format (weight 1), sum-normalised
    by_question = {g["messages"][0][0]["content"]: g["scores"] for g in groups}
    assert by_question["2+2?"] == [1.0, 0.5, 0.5, 0.0], by_question
    assert by_question["1+1?"] == [0.5, 0.0, 0.5, 0.0], by_question  # format only


def test_managed_server_env_against_a_text_only_endpoint(tok_dir, tmp_path):
    out = tmp_path / "g.jsonl"
    with FakeOpenAIServer(tokenizer=tok_dir, responder=lambda p, b: "It is 2") as fake:
        r = run_file(
            "managed_text_env.py",
            *process_args(fake.base_url, tok_dir, out),
            cwd=tmp_path,
            ATROPOS_ALLOW_DUMMY_MANAGED_SERVER="1",
        )
        sent = [req for req in fake.requests if "messages" in req]
    groups = _check(r, out, n_groups=2, group_size=2)
    assert sent and all("return_token_ids" not in req for req in sent)  # plain OpenAI requests
    for g in groups:
        for toks, masks in zip(g["tokens"], g["masks"], strict=True):
            trained = [t for t in masks if t != -100]
            assert trained and trained == toks[len(toks) - len(trained) :]


def test_eval_base_file_through_eval_runner(tok_dir, tmp_path):
    replies = ["2", "4", "6", "8"]
    with FakeOpenAIServer(
        tokenizer=tok_dir, responder=lambda p, b: replies[b["choice_index"] % 4]
    ) as fake:
        r = run_file(
            "aime_style_eval.py",
            "--server-url",
            fake.base_url,
            "--model-name",
            "tiny",
            cwd=tmp_path,
            EVAL_DIR=str(tmp_path / "evals"),
        )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    result = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    # each question has exactly one right answer among the 4 samples: pass@1 = 1/4
    assert result["results"]["all"] == {"pass@1:4": 0.25}
    assert result["config_general"]["model_name"] == "tiny"
    samples = read_jsonl(tmp_path / "evals" / "samples.jsonl")
    assert len(samples) == 4

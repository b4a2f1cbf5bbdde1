"""RLAIF with a judge server, the SFT loader, and teacher distillation against the real CPU engine."""

import json

import pytest

from atroposlib.errors import ConfigError
from atroposlib.testing import FakeOpenAIServer, check_env
from tests.jsonl import read_jsonl


def _judge_single(prompt_text: str, body: dict) -> str:
    # The judge reads the answer inside its prompt: "GOOD" answers get 9, others 2.
    answer = prompt_text.split("[Answer]", 1)[-1]
    return "Fine. Score: 9" if "GOOD" in answer else "Weak. Score: 2"


def _judge_pairwise(prompt_text: str, body: dict) -> str:
    a = prompt_text.split("[Answer A]", 1)[-1].split("[Answer B]", 1)[0]
    return "[[A]]" if "GOOD" in a else "[[B]]"


def _policy(prompt_text: str, body: dict) -> str:
    return "GOOD answer" if body["choice_index"] % 2 == 0 else "meh"


def test_rlaif_single_and_pairwise_and_unreadable_judge():
    from rlaif_server import RLAIFEnv

    with FakeOpenAIServer(responder=_judge_single) as judge:
        groups = check_env(
            RLAIFEnv,
            responder=_policy,
            items=1,
            env_overrides={"group_size": 4, "judge_base_url": judge.base_url},
        )
        assert groups[0]["scores"] == [pytest.approx(8 / 9), pytest.approx(1 / 9)] * 2
        assert "reward_status" not in groups[0]
        assert len(judge.requests) == 4
    with FakeOpenAIServer(responder=_judge_pairwise) as judge:
        groups = check_env(
            RLAIFEnv,
            responder=_policy,
            items=1,
            env_overrides={
                "group_size": 4,
                "judge_base_url": judge.base_url,
                "judge_mode": "pairwise",
            },
        )
        assert groups[0]["scores"] == [1.0, 0.0, 1.0, 0.0]  # GOOD wins all 4 of its comparisons
        assert len(judge.requests) == 8
    with FakeOpenAIServer(responses=["I refuse to grade."]) as judge:
        groups = check_env(
            RLAIFEnv,
            responder=_policy,
            items=1,
            env_overrides={"group_size": 2, "judge_base_url": judge.base_url},
        )
        assert groups[0]["reward_status"] == "unavailable"


def test_sft_loader_formats(tmp_path):
    from sft_loader_server import SFTLoaderEnv

    chats = tmp_path / "chats.jsonl"
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"Q{i}?"},
                {"role": "assistant", "content": f"A{i}."},
                {"role": "user", "content": "more?"},
                {"role": "assistant", "content": "done."},
            ]
        }
        for i in range(3)
    ]
    chats.write_text("\n".join(json.dumps(r) for r in rows))
    groups = check_env(
        SFTLoaderEnv, items=2, env_overrides={"dataset": str(chats), "group_size": 2}
    )
    from transformers import AutoTokenizer

    from atroposlib.testing import tiny_tokenizer_dir

    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    first = groups[0]
    assert first["scores"] == [1.0, 1.0] and first["group_overrides"] == {"sft": True}
    trained = tok.decode([t for t in first["masks"][0] if t != -100], skip_special_tokens=True)
    assert "A0." in trained and "done." in trained and "Q0?" not in trained
    assert all(
        a == (1.0 if m != -100 else 0.0)
        for a, m in zip(first["advantages"][0], first["masks"][0], strict=True)
    )
    assert groups[1]["messages"][1][0]["content"] == "Q0?"  # wrapped around the 3 rows

    pc = tmp_path / "pc.jsonl"
    pc.write_text(json.dumps({"prompt": "2+2?", "completion": "4"}) + "\n")
    group = check_env(
        SFTLoaderEnv,
        items=1,
        env_overrides={"dataset": str(pc), "group_size": 1, "dataset_format": "prompt_completion"},
    )[0]
    assert (
        tok.decode([t for t in group["masks"][0] if t != -100], skip_special_tokens=True).strip()
        == "4"
    )
    share = tmp_path / "share.jsonl"
    share.write_text(
        json.dumps(
            {
                "conversations": [
                    {"from": "human", "value": "hi"},
                    {"from": "gpt", "value": "hello there"},
                ]
            }
        )
        + "\n"
    )
    group = check_env(
        SFTLoaderEnv,
        items=1,
        env_overrides={
            "dataset": str(share),
            "group_size": 1,
            "dataset_format": "sharegpt",
            "column": "conversations",
        },
    )[0]
    assert group["messages"][0][0] == {"role": "user", "content": "hi"}
    assert (
        tok.decode([t for t in group["masks"][0] if t != -100], skip_special_tokens=True).strip()
        == "hello there"
    )
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"text": "plain words"}) + "\n")
    group = check_env(
        SFTLoaderEnv,
        items=1,
        env_overrides={
            "dataset": str(text),
            "group_size": 1,
            "dataset_format": "text",
            "column": "text",
        },
    )[0]
    assert group["masks"][0] == group["tokens"][0]  # plain text: every token is trained
    with pytest.raises(ConfigError, match="file not found"):
        check_env(SFTLoaderEnv, items=1, env_overrides={"dataset": str(tmp_path / "missing.jsonl")})


def _distill_process(env_dir, tmp_path, student_tok, teacher_url, teacher_tok, fake_url, *extra):
    """``teacher_distillation_env.py process``: the fake server is the student, ``teacher_url`` the
    teacher (``--teacher.*`` flags)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "groups.jsonl"
    cmd = [sys.executable, str(env_dir / "teacher_distillation_env.py"), "process"]
    cmd += ["--env.tokenizer_name", str(student_tok), "--openai.base_url", fake_url]
    cmd += ["--teacher.base_url", teacher_url, "--teacher.model_name", "tiny"]
    cmd += ["--teacher.tokenizer_name", str(teacher_tok), "--env.data_source", "procedural"]
    cmd += ["--env.offline_train_size", "5", "--env.eval_size", "2", "--env.total_steps", "1"]
    cmd += ["--env.group_size", "2", "--env.max_token_length", "400", "--env.use_wandb", "false"]
    cmd += ["--env.data_path_to_save_groups", str(out), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    groups = read_jsonl(out)
    return r, groups


@pytest.mark.parametrize(
    "method", ["auto", "prefixes"]
)  # auto picks prompt_logprobs on the CPU engine
def test_teacher_distillation_matches_the_teachers_forward_pass(
    env_dir, tiny_model_dir, cpu_engine, tmp_path, method
):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with FakeOpenAIServer(
        tokenizer=str(tiny_model_dir), responses=["<think>hm</think> \\boxed{7}", "no idea"]
    ) as fake:
        r, groups = _distill_process(
            env_dir,
            tmp_path,
            tiny_model_dir,
            cpu_engine,
            tiny_model_dir,
            fake.base_url,
            "--env.teacher_top_k",
            "3",
            "--env.teacher_method",
            method,
        )
    assert r.returncode == 0, r.stderr[-3000:]
    group = groups[0]
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    texts = [tok.decode([i]) for i in range(len(tok))]
    checked = 0
    for tokens, ids, lps in zip(
        group["tokens"], group["distill_token_ids"], group["distill_logprobs"], strict=True
    ):
        assert len(ids) == len(tokens) == len(lps) and ids[0] == []
        with torch.no_grad():
            logits = model(torch.tensor([tokens])).logits[0].float().log_softmax(-1)
        for p in range(1, len(tokens)):
            assert 1 <= len(ids[p]) <= 4 and len(lps[p]) == len(ids[p])
            best = int(logits[p - 1].argmax())
            # With the prefixes method, ids that decode alike (partial UTF-8 bytes) are merged in
            # OpenAI-shaped top_logprobs, so only tokens with a unique text can be checked exactly.
            if method == "auto" or texts.count(tok.decode([best])) == 1:
                assert best in ids[p]
                assert max(lps[p]) == pytest.approx(float(logits[p - 1].max()), abs=1e-3)
                checked += 1
    assert checked >= 5


def test_teacher_distillation_refuses_a_different_tokenizer(env_dir, tiny_model_dir, tmp_path):
    from atroposlib.testing import tiny_tokenizer_dir

    # The student uses the default tiny tokenizer (384 tokens); the teacher's is the tiny model's (512).
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responses=["x"]) as fake:
        r, groups = _distill_process(
            env_dir,
            tmp_path,
            tiny_tokenizer_dir(),
            fake.base_url,
            tiny_model_dir,
            fake.base_url,
        )
    assert r.returncode == 2 and not groups and "Traceback" not in r.stderr
    assert "Cross-tokenizer distillation is not supported" in r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "module, env_name, flag",
    [
        ("rlaif_server", "RLAIFEnv", "--env.judge_base_url"),
        ("teacher_distillation_env", "GSM8kTeacherDistillEnv", "--teacher.base_url"),
    ],
)
def test_side_server_url_without_scheme_is_a_config_error(module, env_name, flag):
    import importlib

    from atroposlib.runtime.config_loader import load_config

    env_cls = getattr(importlib.import_module(module), env_name)
    with pytest.raises(ConfigError, match=flag.replace(".", r"\.") + ".*https"):
        load_config(env_cls, "process", [flag, "localhost:9001/v1"])
    loaded = load_config(env_cls, "process", [flag, "http://127.0.0.1:9001/v1"])
    if flag.startswith("--teacher."):
        assert loaded.extra_servers["teacher"][0].base_url == "http://127.0.0.1:9001/v1"
    else:
        assert getattr(loaded.env, flag.split(".", 1)[1]) == "http://127.0.0.1:9001/v1"

"""``custom_thinking_prompt`` (Atropos's ``BaseEnvConfig`` field): the flag and the YAML key are
accepted, and the prompt reaches the inference server as the env's thinking system prompt.

``gsm8k_server.py`` always thinks, so the custom prompt takes the place of its thinking preamble;
each run is a real ``process`` subprocess against the fake OpenAI server on loopback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from tests.compat.helpers import REPO_ROOT, env_environ, process_args
from tests.jsonl import read_jsonl

CUSTOM = "Reason in three short steps between <think> and </think>."


def _run_gsm8k(fake_url: str, tok_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = process_args(fake_url, tok_dir, out, "--env.data_source", "procedural")
    args += ["--env.total_steps", "1", "--env.group_size", "2", "--env.offline_train_size", "4"]
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "environments" / "gsm8k_server.py"), *args, *extra],
        capture_output=True,
        text=True,
        env=env_environ(),
        cwd=str(out.parent),
        timeout=180,
    )


def test_field_defaults_to_none_as_in_atropos():
    assert BaseEnvConfig().custom_thinking_prompt is None


@pytest.mark.parametrize("via", ["flag", "yaml"])
def test_custom_thinking_prompt_reaches_the_prompt(tmp_path, via):
    tok_dir = tiny_tokenizer_dir()
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    out = tmp_path / "groups.jsonl"
    if via == "flag":
        extra = ["--env.custom_thinking_prompt", CUSTOM]
    else:
        config = tmp_path / "run.yaml"
        config.write_text(f'env:\n  custom_thinking_prompt: "{CUSTOM}"\n')
        extra = ["--config", str(config)]
    with FakeOpenAIServer(tokenizer=tok_dir, responses=["<think>ok</think> \\boxed{4}"]) as fake:
        r = _run_gsm8k(fake.base_url, tok_dir, out, *extra)
        prompts = [
            tok.decode(body["prompt"]) if isinstance(body.get("prompt"), list) else str(body)
            for body in fake.requests
        ]
    assert r.returncode == 0, r.stderr[-3000:]
    assert prompts and all(CUSTOM in p for p in prompts), prompts[:1]
    assert all("You are a deep thinking AI" not in p for p in prompts)
    system = read_jsonl(out)[0]["messages"][0][0]
    assert system["role"] == "system" and system["content"].startswith(CUSTOM)

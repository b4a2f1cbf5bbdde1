"""Atropos-style env files run unchanged through ``serve`` against a real ``run-api``.

The multi-turn game env feeds a trainer stand-in; the SFT-loader env overrides Atropos's loop hooks
(``add_train_workers`` starts nothing, ``env_step_checks`` sends prepared groups each step,
``get_server_info`` reads ``/info`` with aiohttp) and must be driven by them.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir
from tests.compat.helpers import start_file
from tests.envs.helpers import FakeTrainer, serve_args
from tests.jsonl import read_jsonl


@pytest.fixture(scope="module")
def tok_dir() -> Path:
    return tiny_tokenizer_dir()


def _serve(name: str, api_url: str, fake_url: str, tok_dir: Path, tmp: Path, *extra: str):
    args = ["serve", *serve_args(api_url, fake_url, tok_dir, tmp, *extra)]
    return start_file(name, *args, log=tmp / "env.log")


def _finish(proc, trainer, tmp: Path) -> str:
    try:
        trainer.start()
        rc = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        trainer.halt.set()
    log = (tmp / "env.log").read_text()
    assert rc == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    return log


def test_serve_multi_turn_game_env(run_api, tok_dir, tmp_path):
    api = run_api("--store", "memory")
    trainer = FakeTrainer(api.url, batch_size=4, num_steps=2)
    with FakeOpenAIServer(tokenizer=tok_dir, responder=lambda p, b: "I guess 5") as fake:
        proc = _serve("guess_game_env.py", api.url, fake.base_url, tok_dir, tmp_path)
        _finish(proc, trainer, tmp_path)
    assert len(trainer.batches) == 2
    for batch in trainer.batches:
        assert sum(len(g["tokens"]) for g in batch) == 4
        assert all(g["env_id"] == 0 for g in batch)


def test_serve_sft_env_driven_by_its_loop_hook_overrides(run_api, tok_dir, tmp_path):
    api = run_api("--store", "memory")
    trainer = FakeTrainer(api.url, batch_size=4, num_steps=3)
    with FakeOpenAIServer(tokenizer=tok_dir) as fake:
        proc = _serve("sft_hooks_env.py", api.url, fake.base_url, tok_dir, tmp_path)
        log = _finish(proc, trainer, tmp_path)
        generations = len(fake.requests)
    assert generations == 0  # add_train_workers() override: no rollouts were started
    assert (
        "kept max_token_len 777" in log
    )  # its get_server_info() ran (aiohttp + parse_http_response)
    sent = read_jsonl(tmp_path / "sent.jsonl")
    assert len(trainer.batches) == 3 and len(sent) >= 6  # env_step_checks() fed every step
    assert {g["messages"][0][1]["content"] for g in sent} >= {"1", "2", "3"}
    status = httpx.get(api.url + "/status", timeout=10).json()
    assert status["current_step"] >= 3

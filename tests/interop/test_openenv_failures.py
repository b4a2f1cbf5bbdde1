"""The OpenEnv env against servers that misbehave: every failed episode is dropped and counted under its
kind (one log line per kind), nothing hangs; a server that cannot be used at all ends the run with one
line. Also the happy path against the same WebSocket server, with scripted replies, token for token."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from atroposlib.interop.openenv import OpenEnvEnv
from atroposlib.interop.openenv.client import KINDS
from atroposlib.runtime.config_loader import load_config
from atroposlib.testing.fake_server import FakeOpenAIServer
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.net import free_port
from atroposlib.utils.tokenize_for_trainer import chat_token_ids
from tests.jsonl import read_jsonl

from .conftest import HostileServer

REPLIES = ["hello there", "fine"]


@pytest.fixture(scope="module")
def fake() -> Any:
    def reply(prompt: str, body: dict[str, Any]) -> str:
        return REPLIES[1] if "step 1 ok" in prompt else REPLIES[0]

    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=reply, model="m") as f:
        yield f


def make_env(url: str, fake: FakeOpenAIServer, *extra: str) -> OpenEnvEnv:
    loaded = load_config(
        OpenEnvEnv,
        "process",
        [
            "--openenv.url",
            url,
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            fake.base_url,
            "--openai.model_name",
            "m",
            "--env.group_size",
            "2",
            "--openenv.max_sessions",
            "2",
            "--openenv.message_timeout",
            "1",
            "--openenv.connect_timeout",
            "1",
            "--env.data_path_to_save_groups",
            "none",
            *extra,
        ],
    )
    return OpenEnvEnv(loaded.env, loaded.servers)


async def _one_item(env: OpenEnvEnv) -> Any:
    try:
        await env.setup()
        return await env.collect_trajectories(await env.get_next_item())
    finally:
        await env.server.close()


def test_good_server_gives_a_group_with_exact_tokens_masks_and_rewards(fake):
    with HostileServer("good") as srv:
        env = make_env(srv.url, fake, "--openenv.seed", "7")
        group, backlog = asyncio.run(_one_item(env))
    tok = env.tokenizer
    assert backlog == [] and group is not None
    g = group.model_dump()
    assert g["scores"] == [2.0, 2.0]  # reward 1 per step, two steps, summed
    first = chat_token_ids(tok, [{"role": "user", "content": "seed 7: say hi"}], True)
    eos = [tok.eos_token_id]
    reply = [tok.encode(r, add_special_tokens=False) for r in REPLIES]
    between = tok.encode("\n<|im_start|>user\nstep 1 ok<|im_end|>\n<|im_start|>assistant\n")
    for tokens, masks, lps in zip(g["tokens"], g["masks"], g["inference_logprobs"], strict=True):
        assert tokens == first + reply[0] + eos + between + reply[1] + eos
        generated = [
            i
            for i in range(len(tokens))
            if len(first) <= i < len(first) + len(reply[0]) + 1
            or i >= len(tokens) - len(reply[1]) - 1
        ]
        assert [i for i, m in enumerate(masks) if m != MASK_IGNORE] == generated
        assert all(masks[i] == tokens[i] for i in generated)
        assert all(lps[i] == 1.0 for i in range(len(tokens)) if i not in generated)
        assert all(lps[i] < 0 for i in generated)
    roles = [m["role"] for m in g["messages"][0]]
    assert roles == ["user", "assistant", "user", "assistant", "grader"]
    assert env.context.drop_counts == {}


@pytest.mark.parametrize(
    "mode,kind",
    [
        ("silent", "timeout"),
        ("close_mid", "closed"),
        ("refuse", "refused"),
        ("not_json", "malformed"),
        ("binary", "malformed"),
        ("no_observation", "malformed"),
        ("bad_reward", "malformed"),
        ("step_error", "error"),
    ],
)
def test_misbehaving_server_drops_and_counts_the_episodes(fake, caplog, mode, kind):
    caplog.set_level(logging.WARNING, logger="atroposlib.interop.openenv.env")
    with HostileServer(mode) as srv:
        env = make_env(srv.url, fake)
        start = time.monotonic()
        group, _ = asyncio.run(_one_item(env))
        took = time.monotonic() - start
    assert group is None
    assert dict(env.context.drop_counts) == {f"openenv episode: server {KINDS[kind]}": 2}
    lines = [r.getMessage() for r in caplog.records if "dropped an OpenEnv episode" in r.message]
    assert len(lines) == 1 and KINDS[kind] in lines[0], lines  # one line per kind
    assert took < 15, took


def test_server_that_never_completes_the_handshake_times_out():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # the kernel accepts connections; nobody ever answers them
    try:
        with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), model="m") as f:
            env = make_env(f"ws://127.0.0.1:{sock.getsockname()[1]}", f)
            start = time.monotonic()
            with pytest.raises(Exception, match="did not answer in time") as e:
                asyncio.run(_one_item(env))
            assert type(e.value).__name__ == "RunFailed"
            assert time.monotonic() - start < 10
    finally:
        sock.close()


def test_dead_server_at_start_is_one_line_and_exit_1(tmp_path):
    port = free_port()  # nothing listens there
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "atroposlib.interop.openenv",
            "process",
            "--openenv.url",
            f"http://127.0.0.1:{port}",
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            "http://127.0.0.1:1/v1",
            "--env.data_path_to_save_groups",
            str(tmp_path / "out.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "could not be reached" in errors[0], r.stderr
    assert f"ws://127.0.0.1:{port}/ws" in errors[0]
    assert "Traceback" not in r.stderr


def test_a_server_type_without_token_ids_is_a_one_line_usage_error():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "atroposlib.interop.openenv",
            "process",
            "--openenv.url",
            "http://127.0.0.1:1",
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            "http://127.0.0.1:1/v1",
            "--openai.server_type",
            "openai",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--openai.server_type vllm" in errors[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "flags,message",
    [
        (
            ["--openenv.max_turnz", "3"],
            "unknown flag --openenv.max_turnz; did you mean --openenv.max_turns?",
        ),
        ([], "--openenv.url is required (the OpenEnv server, e.g. http://host:8000)"),
        (
            ["--openenv.url", "x", "--openenv.max_turns", "0"],
            "invalid value for --openenv.max_turns",
        ),
    ],
)
def test_usage_mistakes_are_one_line_errors(tmp_path, flags, message):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "atroposlib.interop.openenv",
            "process",
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            "http://127.0.0.1:1/v1",
            "--env.data_path_to_save_groups",
            str(tmp_path / "out.jsonl"),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr


def test_evaluate_plays_eval_episodes_and_writes_metrics(fake, tmp_path):
    with HostileServer("good") as srv:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "atroposlib.interop.openenv",
                "evaluate",
                "--openenv.url",
                srv.url,
                "--openenv.eval_episodes",
                "3",
                "--openenv.reward",
                "last",
                "--env.tokenizer_name",
                str(tiny_tokenizer_dir()),
                "--env.data_dir_to_save_evals",
                str(tmp_path / "evals"),
                "--openai.base_url",
                fake.base_url,
                "--openai.model_name",
                "m",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        connections = srv.connections
    assert r.returncode == 0, r.stderr[-3000:]
    assert connections == 1 + 3  # the start-up probe, then one session per episode
    metrics = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    flat = json.dumps(metrics)
    assert '"eval/mean_reward": 1.0' in flat and '"eval/done_fraction": 1.0' in flat, flat
    samples = read_jsonl(tmp_path / "evals" / "samples.jsonl")
    assert sorted(s["seed"] for s in samples) == [1_000_000, 1_000_001, 1_000_002]

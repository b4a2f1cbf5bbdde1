"""The OpenEnv env against a real OpenEnv server (openenv 0.10.0's own server code, in its own
environment) with our CPU engine writing the replies: ``process`` through the real command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from atroposlib.interop.openenv import OpenEnvEnv
from atroposlib.interop.openenv.client import KINDS
from atroposlib.runtime.config_loader import load_config
from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.tokenize_for_trainer import chat_token_ids
from tests.interop.helpers import train_two_steps, trained_runs
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]


def test_process_plays_multi_turn_episodes_on_a_real_openenv_server(
    real_stack, tiny_model_dir: Path, tmp_path: Path
):
    srv, engine = real_stack.count_server, real_stack.engine
    out = tmp_path / "groups.jsonl"
    argv = [
        sys.executable,
        "-m",
        "atroposlib.interop.openenv",
        "process",
        "--openenv.url",
        srv.url,
        "--openenv.seed",
        "5",
        "--openenv.max_tokens_per_turn",
        "6",
        "--env.group_size",
        "3",
        "--env.total_steps",
        "2",
        "--env.tokenizer_name",
        str(tiny_model_dir),
        "--env.data_path_to_save_groups",
        str(out),
        "--openai.base_url",
        engine.url + "/v1",
        "--openai.model_name",
        "tiny",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    groups = read_jsonl(out)
    assert len(groups) == 2
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    seeds = set()
    for g in groups:
        assert len(g["tokens"]) == 3
        firsts = {m[0]["content"] for m in g["messages"]}
        assert len(firsts) == 1, "a group's episodes start from the same reset seed"
        (first,) = firsts
        seeds.add(first)
        for tokens, masks, lps, msgs, score in zip(
            g["tokens"],
            g["masks"],
            g["inference_logprobs"],
            g["messages"],
            g["scores"],
            strict=True,
        ):
            replies = [m["content"] for m in msgs if m["role"] == "assistant"]
            feedback = [m["content"] for m in msgs[1:] if m["role"] == "user"]
            assert len(replies) == 3 and len(feedback) == 2  # done after 3 steps
            assert score == sum((len(x) % 5) / 4 for x in replies)  # the env's own rewards
            runs = trained_runs(masks)
            assert len(runs) == 3, "one trained stretch per turn, the env's feedback masked"
            for (a, b), reply in zip(runs, replies, strict=True):
                assert masks[a:b] == tokens[a:b]
                assert tok.decode(tokens[a:b], skip_special_tokens=True) == reply
                assert all(lp <= 0 for lp in lps[a:b])
            prompt = chat_token_ids(tok, [{"role": "user", "content": first}], True)
            assert tokens[: runs[0][0]] == prompt
            masked_text = tok.decode(tokens[runs[0][1] : runs[1][0]], skip_special_tokens=False)
            assert feedback[0] in masked_text and masked_text.endswith("assistant\n")
            assert all(lps[i] == 1.0 for i, m in enumerate(masks) if m == MASK_IGNORE)
    assert seeds == {
        "Episode seed 5. Say something; I count its characters.",
        "Episode seed 6. Say something; I count its characters.",
    }
    assert out.with_suffix(".html").is_file()


def test_server_refusing_a_second_session_drops_and_counts(real_stack, tiny_model_dir):
    srv, engine = real_stack.count_server, real_stack.engine  # the server allows one session
    loaded = load_config(
        OpenEnvEnv,
        "process",
        [
            "--openenv.url",
            srv.url,
            "--openenv.max_sessions",
            "2",
            "--openenv.max_tokens_per_turn",
            "3",
            "--env.group_size",
            "2",
            "--env.tokenizer_name",
            str(tiny_model_dir),
            "--openai.base_url",
            engine.url + "/v1",
            "--openai.model_name",
            "tiny",
            "--env.data_path_to_save_groups",
            "none",
        ],
    )
    env = OpenEnvEnv(loaded.env, loaded.servers)

    async def run() -> Any:
        try:
            await env.setup()
            return await env.collect_trajectories(await env.get_next_item())
        finally:
            await env.server.close()

    group, _ = asyncio.run(run())
    assert group is None
    assert dict(env.context.drop_counts) == {f"openenv episode: server {KINDS['refused']}": 1}

    # one session at a time (the default) plays the whole group on the same server
    loaded.env.openenv.max_sessions = 1
    env = OpenEnvEnv(loaded.env, loaded.servers)
    group, _ = asyncio.run(run())
    assert group is not None and len(group.tokens) == 2


def test_serve_feeds_our_trainer_two_steps_through_run_api(
    real_stack, tiny_model_dir: Path, run_api, tmp_path: Path
):
    srv, engine = real_stack.count_server, real_stack.engine
    api = run_api("--store", "memory")
    env_flags = ["-m", "atroposlib.interop.openenv", "serve", "--openenv.url", srv.url]
    env_flags += ["--openenv.max_tokens_per_turn", "6"]
    rows = train_two_steps(env_flags, tiny_model_dir, api.url, engine.url, tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["trained_tokens"] > 0 and r["reward_mean"] is not None for r in rows)

"""The whole loop as real processes: run-api, the CPU engine, the arithmetic env (`serve`) and the
trainer in reload mode. The loop turns, weights change, the engine reloads them (weights_version
bumps), and a resumed trainer continues at the right step."""

from __future__ import annotations

import random
import sys

import httpx
import torch
from _trainer_helpers import REPO, metrics_steps, start, trainer_cmd

from atroposlib.utils.net import free_port, wait_for_http
from tests.jsonl import read_jsonl


def _warm_model(tiny_model, out):
    from atroposlib.utils.arithmetic_task import make_problem
    from demo.warmup import sft_warmup

    def gold(rng: random.Random, n: int):
        return [(p.prompt, p.answer) for p in (make_problem(rng) for _ in range(n))]

    return sft_warmup(tiny_model, out, gold, steps=120, lr=1e-2, batch_size=32)


def test_rl_loop_through_real_services(run_api, tiny_model, tmp_path):
    torch.set_num_threads(1)
    model = _warm_model(tiny_model, tmp_path / "warm")
    api = run_api("--store", "memory")
    port = free_port()
    engine_url = f"http://127.0.0.1:{port}"
    procs = []
    try:
        engine = start(
            [
                sys.executable,
                "-m",
                "atroposlib.cli.serve_model",
                "--model",
                str(model),
                "--port",
                str(port),
                "--served-model-name",
                "policy",
                "--torch-threads",
                "1",
            ],
            tmp_path / "engine.log",
        )
        procs.append(engine)
        wait_for_http(engine_url + "/health", timeout=120, proc=engine)
        assert httpx.get(engine_url + "/health").json()["weights_version"] == 0
        save = tmp_path / "trainer"
        common = (
            "--weight-refresh",
            "reload",
            "--inference-urls",
            engine_url,
            "--vllm-restart-interval",
            "1",
            "--checkpoint-interval",
            "1",
            "--batch-size",
            "32",
            "--lr",
            "2e-3",
        )
        first = start(trainer_cmd(model, api.url, save, 3, *common), tmp_path / "t1.log")
        procs.append(first)
        env = start(
            [
                sys.executable,
                str(REPO / "environments" / "arithmetic_server.py"),
                "serve",
                "--env.tokenizer_name",
                str(model),
                "--env.rollout_server_url",
                api.url,
                "--env.group_size",
                "8",
                "--env.total_steps",
                "5",
                "--env.max_batches_offpolicy",
                "1",
                "--env.spool_dir",
                str(tmp_path / "spool"),
                "--openai.base_url",
                engine_url + "/v1",
                "--openai.api_key",
                "x",
                "--openai.model_name",
                "policy",
                "--openai.server_type",
                "vllm",
            ],
            tmp_path / "env.log",
        )
        procs.append(env)
        assert first.wait(180) == 0, (tmp_path / "t1.log").read_text()[-3000:]
        rows = read_jsonl(save / "metrics.jsonl")
        assert [r["step"] for r in rows] == [1, 2, 3]
        # reloads run in the background: step k's row reports the engine version of the newest
        # completed push, and names its step (the previous one)
        versions = [(r["weights_version"], r["weights_version_step"]) for r in rows[1:]]
        assert versions == [(1, 1), (2, 2)]
        health = httpx.get(engine_url + "/health").json()
        assert health["weights_version"] == 3  # one reload per step, the last one awaited at exit
        assert health["model_path"].endswith("step_0000003")
        assert all(r["reward_mean"] is not None and r["trained_tokens"] > 0 for r in rows)
        assert all(
            r["mismatch_abs_delta"] < 0.5 for r in rows
        )  # engine and trainer agree on logprobs

        from safetensors.torch import load_file

        w0 = load_file(str(model / "model.safetensors"))
        w3 = load_file(str(save / "weights" / "step_0000003" / "model.safetensors"))
        assert any(not torch.equal(w0[k], w3[k]) for k in w0)

        second = start(
            trainer_cmd(model, api.url, save, 5, *common, "--resume"), tmp_path / "t2.log"
        )
        procs.append(second)
        assert second.wait(180) == 0, (tmp_path / "t2.log").read_text()[-3000:]
        assert "at step 3" in (tmp_path / "t2.log").read_text()
        assert metrics_steps(save) == [1, 2, 3, 4, 5]
        # resume pushes the checkpoint's weights (labelled step 3), then steps 4 and 5 push theirs:
        # the engine reports the trainer step of the weights it serves, not a count of loads
        assert httpx.get(engine_url + "/health").json()["weights_version"] == 5
    finally:
        for p in procs[::-1]:
            if p.poll() is None:
                p.terminate()
                p.wait(30)

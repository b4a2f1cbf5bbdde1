"""Throughput of the batched CPU inference engine vs sequential per-request generation, in one run.

Builds a tiny (~0.86M-parameter) model, starts two real `atropos-serve-model` processes on it: one with
batching (default flags) and one with `--no-batching` (one request row at a time: the baseline), then
drives them over HTTP with 1, 4 and 16 concurrent clients in interleaved rounds, each sending requests of `--max-tokens` tokens
(temperature 1, ignore_eos). Prints generated tokens/s and the ratio against the baseline, and the max
abs difference between the logprobs the batched engine returned (rows left-padded in one batch) and a
plain forward pass of the same model over the same tokens.

Usage: python bench/engine_throughput.py [--max-tokens 64] [--requests-per-client 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from subprocs import launch, running

from atroposlib.utils.net import free_port

PROMPTS = [f"What is {a} + {b}? Answer:" for a, b in [(3, 4), (12, 30), (100, 7), (5, 55)]] + [
    "Hello",
    "Spell the word apple backward, letter by letter:",
    "x",
    "Count the letters in banana",
]


def start_server(
    model: Path, port: int, threads: int, extra: list[str], log: Path
) -> subprocess.Popen:
    flags = ["--model", str(model), "--torch-threads", str(threads), "--log-level", "warning"]
    # requests name the model: an unknown model name is a 404, as in vLLM
    flags += ["--served-model-name", "bench", *extra]
    return launch("atroposlib.cli.serve_model", port, flags, log)


def drive(url: str, clients: int, per_client: int, max_tokens: int) -> tuple[float, int]:
    """Run `clients` threads, each sending `per_client` requests back to back; return (tok/s, tokens)."""

    def client(i: int) -> int:
        total = 0
        with httpx.Client(timeout=600) as http:
            for j in range(per_client):
                r = http.post(
                    url + "/v1/completions",
                    json={
                        "model": "bench",
                        "prompt": PROMPTS[(i + j) % len(PROMPTS)],
                        "max_tokens": max_tokens,
                        "temperature": 1.0,
                        "ignore_eos": True,
                        "seed": i * 1000 + j,
                    },
                )
                r.raise_for_status()
                total += r.json()["usage"]["completion_tokens"]
        return total

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        tokens = sum(pool.map(client, range(clients)))
    return tokens / (time.perf_counter() - t0), tokens


def logprob_gap(url: str, model_dir: Path) -> float:
    """Max |engine logprob - forward-pass logprob| over concurrent (left-padded) requests."""
    import torch
    from transformers import AutoModelForCausalLM

    def ask(p: str) -> dict:
        return httpx.post(
            url + "/v1/completions",
            timeout=600,
            json={
                "prompt": p,
                "max_tokens": 32,
                "temperature": 1.0,
                "seed": 1,
                "logprobs": 0,
                "return_token_ids": True,
                "ignore_eos": True,
            },
        ).json()["choices"][0]

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        choices = list(pool.map(ask, PROMPTS))
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    worst = 0.0
    for ch in choices:
        prompt, comp = ch["prompt_token_ids"], ch["token_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + comp])).logits[0].float(), dim=-1)
        ref = logp[len(prompt) - 1 : -1].gather(-1, torch.tensor(comp).unsqueeze(-1)).squeeze(-1)
        got = torch.tensor(ch["logprobs"]["token_logprobs"])
        worst = max(worst, (ref - got).abs().max().item())
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--baseline-requests", type=int, default=8)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per server (default 1: the HTTP clients need the other core; "
        "2 threads on a busy 2-core box collapse)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="interleaved measurement rounds")
    ap.add_argument("--model", default=None, help="model dir (default: build a tiny one)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        if args.model:
            model = Path(args.model)
        else:
            from atroposlib.inference.tiny_model import build_tiny_model

            model = build_tiny_model(tmpd / "tiny", seed=0)
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(model)
        print(
            f"model: {model.name} hidden={cfg.hidden_size} layers={cfg.num_hidden_layers} "
            f"vocab={cfg.vocab_size}; cpu cores={os.cpu_count()}, torch threads/server={args.threads}"
        )
        with running() as procs:
            base_port, batch_port = free_port(), free_port()
            procs.append(
                start_server(model, base_port, args.threads, ["--no-batching"], tmpd / "base.log")
            )
            procs.append(start_server(model, batch_port, args.threads, [], tmpd / "batch.log"))
            base_url, url = f"http://127.0.0.1:{base_port}", f"http://127.0.0.1:{batch_port}"
            drive(base_url, 1, 2, 8)  # warm-up
            drive(url, 4, 1, 8)
            # Interleave rounds so that load from other processes hits baseline and batched alike.
            totals = {c: [0.0, 0] for c in ("base", 1, 4, 16)}
            for _ in range(args.rounds):
                for c in ("base", 1, 4, 16):
                    t0 = time.perf_counter()
                    if c == "base":
                        _, tokens = drive(base_url, 1, args.baseline_requests, args.max_tokens)
                    else:
                        _, tokens = drive(url, c, args.requests_per_client, args.max_tokens)
                    totals[c][0] += time.perf_counter() - t0
                    totals[c][1] += tokens
            base_tps = totals["base"][1] / totals["base"][0]
            print(
                f"baseline (server --no-batching, 1 client, sequential requests): {base_tps:8.0f} tok/s"
            )
            for c in (1, 4, 16):
                tps = totals[c][1] / totals[c][0]
                print(
                    f"batched server, {c:2d} concurrent clients: {tps:8.0f} tok/s "
                    f"({totals[c][1]} tokens)  ratio vs baseline: {tps / base_tps:5.2f}x"
                )
            gap = logprob_gap(url, model)
            print(
                f"max |engine logprob - forward-pass logprob| (fp32, left-padded batch): {gap:.2e}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

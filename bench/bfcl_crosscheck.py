"""Do we score BFCL as BFCL does? One model served by a real vLLM, evaluated by ``atroposlib.interop.bfcl``
(prompt mode) and by BFCL's own pipeline (``bfcl generate --skip-server-setup`` + ``bfcl evaluate``) on
the same server and the same entries; per-category accuracy must agree within 1 point.

Both sides ask the same vLLM server (its CPU build here: ``--max-model-len 8192``, as SmolLM2's config
says, since BFCL asks for ``min(4096, context - prompt - 2)`` tokens), greedily (BFCL's side at
``--temperature 0``; its default is 0.001), with the same budget rule. Ours sends chat completions (vLLM
renders the model's chat template); BFCL's handler (``QuickTestingOSSHandler``, through the wrapper
``bench/bfcl_official_side.py``) renders the same template itself and sends text completions.

The official side needs the whole bfcl-eval package in its own environment:
``bash scripts/setup_bfcl.sh --official`` (or ``ATROPOS_BFCL_OFFICIAL_PYTHON``). By hand, with a server
already running on port P and ``ids.json`` naming the entries (``{"simple_python": ["simple_python_0",
...], ...}``):

    ~/.cache/atroposlib/bfcl-eval-full-2026.3.23/bin/python bench/bfcl_official_side.py \\
        --root /tmp/bfcl-official --base-url http://127.0.0.1:P/v1 --model-dir MODEL --ids ids.json \\
        --temperature 0

``--replay FILE`` (a ``heldout_*.jsonl`` of a BFCL demo run, or ``samples.jsonl`` of ``bfcl_env.py
evaluate``) checks the scoring alone, entry by entry: a fake OpenAI server on loopback answers each
question with the reply recorded for it, to both sides; every entry's verdict must be BFCL's (no vLLM,
a minute or two).

A benchmark (minutes to an hour on 2 CPU cores, depending on ``--per-category`` and how long the model's
answers are); run it under ``flock /tmp/heavy.lock``. A model that calls functions some of the time
makes a stronger check than the base SmolLM2 (0 everywhere): pass a trained one, e.g. a BFCL demo run's
warm-up (``--model runs/demo-smollm2-bfcl/model/warm``).

    python bench/bfcl_crosscheck.py [--model DIR] [--per-category 25] [--seed 0] [--out runs/bfcl-crosscheck]
        [--replay FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
CONTEXT = 8192  # SmolLM2's max_position_embeddings: what BFCL's handler reads
BUDGET_CAP = 4096  # BFCL's own cap on a reply
TOLERANCE = 0.01
OFFICIAL_VENV = Path.home() / ".cache" / "atroposlib" / "bfcl-eval-full-2026.3.23"


def official_python() -> str:
    env = os.environ.get("ATROPOS_BFCL_OFFICIAL_PYTHON")
    if env:
        return env
    if (OFFICIAL_VENV / ".atroposlib-bfcl-ok").exists():
        return str(OFFICIAL_VENV / "bin" / "python")
    raise SystemExit(
        "bfcl_crosscheck: the official side needs the whole bfcl-eval package: run "
        "bash scripts/setup_bfcl.sh --official or set ATROPOS_BFCL_OFFICIAL_PYTHON"
    )


def start_vllm(model: Path, log: Path) -> tuple[subprocess.Popen, str]:
    from atroposlib.inference.vllm_launch import vllm_server
    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    server = vllm_server(str(model), port, max_model_len=CONTEXT)
    env = server.full_env()
    env["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="vllm-cache-")
    env["VLLM_CPU_KVCACHE_SPACE"] = "4"  # several 8k-token sequences at once
    with open(log, "ab") as fh:
        proc = subprocess.Popen(server.argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/health", timeout=900, proc=proc)
    return proc, url


async def our_side(url: str, model: Path, entries: list[Any], checker: Any) -> Any:
    """atroposlib's evaluation with BFCL's budget rule, greedy, through the vllm backend."""
    from transformers import AutoTokenizer

    from atroposlib.inference_clients.config import APIServerConfig
    from atroposlib.inference_clients.server_manager import ServerManager
    from atroposlib.interop.bfcl import PROMPT_MODE, evaluate_entries
    from atroposlib.interop.bfcl.answering import ask_prompt_mode

    tok = AutoTokenizer.from_pretrained(str(model))
    config = APIServerConfig(
        base_url=url + "/v1",
        server_type="vllm",
        model_name=str(model),  # vLLM's default served name: the --model argument
        api_key="x",
        health_check=False,
        min_tokens_per_second=0.05,
        num_requests_for_eval=32,
    )
    manager = ServerManager([config])

    async def ask(entry: Any) -> Any:
        rendered = tok.apply_chat_template(entry.chat(), tokenize=False, add_generation_prompt=True)
        budget = min(BUDGET_CAP, CONTEXT - len(tok.tokenize(rendered)) - 2)
        return await ask_prompt_mode(manager, entry, budget, split="eval")

    try:
        return await evaluate_entries(entries, ask, checker, mode=PROMPT_MODE, concurrency=32)
    finally:
        await manager.close()


def official_side(url: str, model: Path, entries: list[Any], out: Path) -> dict[str, Any]:
    ids: dict[str, list[str]] = {}
    for e in entries:
        ids.setdefault(e.category, []).append(e.id)
    (out / "ids.json").write_text(json.dumps(ids))
    argv = [official_python(), str(REPO / "bench" / "bfcl_official_side.py")]
    argv += ["--root", str(out / "official"), "--base-url", url + "/v1", "--model-dir", str(model)]
    argv += ["--ids", str(out / "ids.json"), "--temperature", "0"]
    done = subprocess.run(argv, capture_output=True, text=True)
    (out / "official.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().split("\n")[-10:])
        raise SystemExit(f"bfcl_crosscheck: BFCL's own pipeline failed:\n{tail}")
    return dict(json.loads(done.stdout.strip().split("\n")[-1]))


def replay_entry(entries: list[Any], prompt: str) -> Any:
    """The entry a prompt asks, or None: its question is in the prompt, and so is every one of its
    functions' names; of several such (BFCL asks some questions in two categories, with one function
    and with several), the one with the longest question, then the most functions."""
    asked = [
        e
        for e in entries
        if e.question in prompt and all(str(f.get("name")) in prompt for f in e.functions)
    ]
    return max(asked, key=lambda e: (len(e.question), len(e.functions)), default=None)


UNMATCHED: list[str] = []
"""Prompts the replay server found no entry for (answered with an empty reply, and reported)."""


def replay_server(model: Path, entries: list[Any], replies: dict[str, str]) -> Any:
    """A fake OpenAI server answering each entry's question with its recorded reply."""
    from atroposlib.testing import FakeOpenAIServer

    def reply(prompt: str, body: dict[str, Any]) -> str:
        entry = replay_entry(entries, prompt)
        if entry is None:
            UNMATCHED.append(prompt[-120:])
            return ""
        return replies[entry.id]

    return FakeOpenAIServer(tokenizer=str(model), responder=reply, model=str(model)).start()


def compare(ours: Any, official: dict[str, Any]) -> bool:
    """Print both sides per category, with the entries whose verdicts differ; True when every
    category is within ``TOLERANCE``."""
    print(
        f"{'category':<20} {'n':>4} {'atroposlib':>11} {'BFCL':>8} {'diff':>7}  entries differing"
    )
    ok = True
    for category, score in ours.by_category().items():
        theirs = official[category]
        diff = score.accuracy - theirs["accuracy"]
        ok &= abs(diff) <= TOLERANCE + 1e-9
        failed = set(theirs.get("failed", {}))
        differ = [
            r.entry_id
            for r in ours.results
            if r.category == category and r.verdict.valid == (r.entry_id in failed)
        ]
        print(
            f"{category:<20} {score.n:>4} {100 * score.accuracy:>10.1f} "
            f"{100 * theirs['accuracy']:>8.1f} {100 * diff:>+7.1f}  {len(differ)} {differ[:5]}"
        )
    return ok


def main() -> int:
    from atroposlib.interop.bfcl import BfclChecker, fixed_subsample

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=REPO / "runs" / "models" / "SmolLM2-135M-Instruct")
    p.add_argument("--per-category", type=int, default=25, help="entries per category (all: 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bfcl-crosscheck")
    p.add_argument("--replay", type=Path, default=None, help="recorded replies (JSON lines)")
    args = p.parse_args()
    # a SIGTERM (a job's kill) unwinds like Ctrl-C, so the vLLM server it started is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    official_python()  # fail first, in one line, when the official side cannot run
    args.out.mkdir(parents=True, exist_ok=True)
    with BfclChecker.start() as checker:
        loaded = checker.load(CATEGORIES)
        if args.replay:
            rows = [json.loads(x) for x in args.replay.read_text().split("\n") if x.strip()]
            replies = {r["id"]: r.get("text") or "" for r in rows}
            entries = [e for group in loaded.values() for e in group if e.id in replies]
            server = replay_server(args.model, entries, replies)
            url, stop = server.base_url.removesuffix("/v1"), server.stop
            where = f"replayed from {args.replay}"
        else:
            entries = fixed_subsample(loaded, args.per_category or None, args.seed)
            proc, url = start_vllm(args.model, args.out / "vllm.log")
            where = "real vLLM, greedy"

            def stop() -> None:
                proc.terminate()
                proc.wait(60)

        try:
            t0 = time.perf_counter()
            ours = asyncio.run(our_side(url, args.model, entries, checker))
            t_ours = time.perf_counter() - t0
            official = official_side(url, args.model, entries, args.out)
            t_official = time.perf_counter() - t0 - t_ours
        finally:
            stop()
    with open(args.out / "ours.jsonl", "w") as fh:
        for r in ours.results:
            fh.write(json.dumps(r.record()) + "\n")
    print(
        f"\n{args.model.name}, {len(entries)} entries, {where}; ours {t_ours:.0f}s, "
        f"BFCL's {t_official:.0f}s"
    )
    ok = compare(ours, official)
    if UNMATCHED:
        print(
            f"replay: {len(UNMATCHED)} prompt(s) matched no recorded entry, e.g. {UNMATCHED[0]!r}"
        )
        ok = False
    print(f"target: every category within {100 * TOLERANCE:.0f} point: {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

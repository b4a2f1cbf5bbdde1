"""Helpers of the trainer tests: a scripted producer and trainer processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from atroposlib.api.client import TrajectoryClient
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
# How long one trainer run may take in a test. A run here is mostly process start-up: on a 2-core
# machine shared with other jobs (load 7-20) importing torch and transformers alone took 30 s (45 s
# with torch 2.11's CUDA build, the GPU machine's), and a torchrun run starts three such processes.
# The FSDP resume test (three runs, two under torchrun) measured 89-311 s, against the suite's 300 s
# per test and the 180 s per run it allowed: it failed on time, not on an assertion, on a busy machine.
TRAINER_RUN_TIMEOUT_S = 420


def with_teacher_and_reference(groups: list[dict]) -> list[dict]:
    """Give every position of ``groups`` a teacher's top-2 and a reference log-probability (in
    place), so the KL and distillation terms run too; returns ``groups``."""
    for g in groups:
        g["distill_token_ids"] = [[[5, 6] for _ in t] for t in g["tokens"]]
        g["distill_logprobs"] = [[[-0.1, -2.4] for _ in t] for t in g["tokens"]]
        g["ref_logprobs"] = [[-5.0 for _ in t] for t in g["tokens"]]
    return groups


def scripted_groups(
    n_groups: int, group_size: int = 4, seed: int = 0, vocab: int = 300
) -> list[dict]:
    """Deterministic groups as an env would build them: prompt masked, inference logprobs, 0/1 scores."""
    rng = random.Random(seed)
    groups = []
    for g in range(n_groups):
        prompt = [rng.randrange(3, vocab) for _ in range(4)]
        toks, masks, lps, scores = [], [], [], []
        for i in range(group_size):
            comp = [rng.randrange(3, vocab) for _ in range(rng.randint(2, 5))]
            toks.append(prompt + comp)
            masks.append([-100] * len(prompt) + comp)
            lps.append([1.0] * len(prompt) + [-rng.uniform(4.0, 7.0) for _ in comp])
            scores.append(float(i % 2))
        groups.append(
            {
                "tokens": toks,
                "masks": masks,
                "scores": scores,
                "inference_logprobs": lps,
                "group_id": f"g{seed}-{g}",
                "policy_version": 0,
            }
        )
    return groups


def post_groups(api_url: str, groups: list[dict]) -> None:
    with TrajectoryClient(api_url) as c:
        for g in groups:
            c.post_scored_data(g)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        TRANSFORMERS_VERBOSITY="error",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return env


def trainer_cmd(
    model: Path,
    api_url: str,
    save: Path,
    steps: int,
    *extra: str,
    seq_len: int = 32,
    batch_wait_timeout: float = 40,
) -> list[str]:
    """argv of our GRPO trainer on CPU: batches of 8 sequences, one torch thread, ``extra`` flags last."""
    return [
        sys.executable,
        "-m",
        "example_trainer.grpo",
        "--model-name",
        str(model),
        "--api-url",
        api_url,
        "--save-path",
        str(save),
        "--training-steps",
        str(steps),
        "--batch-size",
        "8",
        "--seq-len",
        str(seq_len),
        "--lr",
        "1e-2",
        "--torch-threads",
        "1",
        "--device",
        "cpu",
        "--batch-poll-interval",
        "0.02",
        "--batch-wait-timeout",
        str(batch_wait_timeout),
        *extra,
    ]


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    fh = open(log, "ab")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=child_env(), cwd=REPO)
    fh.close()
    return proc


def metrics_steps(save: Path) -> list[int]:
    path = save / "metrics.jsonl"
    return [row["step"] for row in read_jsonl(path)]

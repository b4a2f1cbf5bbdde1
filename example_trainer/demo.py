"""The end-to-end CPU demo: a tiny model learns single-digit addition through the real RL loop.

One command (``bash scripts/demo.sh``, or ``python -m example_trainer.demo``) does, on loopback:

1. builds a tiny Llama (~0.9M parameters, its own byte-level tokenizer) from nothing, in seconds;
2. **warm-up phase**: a few seconds of supervised training on gold demonstrations drawn from the task's
   own generator (a random model never samples a right answer, so RL would see only zero rewards);
3. starts, as separate processes: ``run-api`` (trajectory API), the CPU inference engine serving the
   warmed-up model, the arithmetic environment (``environments/arithmetic_server.py serve``) and the GRPO trainer, which pulls batches from
   the API, trains, and pushes its weights to the engine after every step (``--weight-refresh reload``);
4. prints a live line (step, reward, tokens/s) and finally writes the report folder: ``metrics.jsonl``
   (one object per trainer step, with ``step`` and ``reward_mean``), ``reward_curve.png``,
   ``rollouts.html`` (sampled groups early and late in the run) and ``summary.txt``.

``--control shuffled`` runs the same thing with each group's rewards shuffled inside the trainer: the
reward then carries no information, and the curve must stay flat. Both runs print the mean reward of
the first and the last 50 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional

from atroposlib.utils.cli import (
    CliParser,
    fail,
    non_negative_int,
    positive_float,
    positive_int,
)
from example_trainer.demo_servers import ENV_FILE, REPO, peek_groups, refresh_times, vllm_missing

TINY_DEFAULTS = {
    "steps": 300,
    "prompts_per_step": 16,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 100,
}


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parse the demo's flags; counts are checked here so a typo never wipes the report folder.
    Flags left unset take the chosen model's defaults (``--model tiny`` or ``smollm2``)."""
    p = CliParser(prog="atropos-demo", description="End-to-end CPU RL demo (see README).")
    p.add_argument(
        "--model",
        choices=["tiny", "smollm2"],
        default="tiny",
        help="tiny: a 0.9M Llama built from scratch, warmed up, on raw single-digit addition "
        "(default); smollm2: the pretrained SmolLM2-135M-Instruct on chat arithmetic, LoRA through "
        "a real vLLM (needs --inference vllm).",
    )
    p.add_argument(
        "--task",
        choices=["arithmetic", "calculator"],
        default="arithmetic",
        help="arithmetic: the model's addition task (default); calculator: multi-turn tool use, "
        "multiplications solved with a calculator tool (needs --model smollm2).",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="Report folder (default: runs/demo, runs/demo-smollm2, runs/demo-smollm2-calculator; "
        "-control for --control shuffled).",
    )
    p.add_argument(
        "--steps", type=positive_int, help="GRPO steps (tiny 300, smollm2 40, calculator 30)."
    )
    p.add_argument(
        "--prompts-per-step",
        type=positive_int,
        help="Groups per batch (tiny 16, smollm2 and calculator 4).",
    )
    p.add_argument("--group-size", type=positive_int, help="Samples per prompt (default 8).")
    p.add_argument("--lr", type=positive_float, help="GRPO learning rate (default 5e-4).")
    p.add_argument(
        "--warmup-sft-steps",
        type=non_negative_int,
        help="Supervised warm-up steps on gold demonstrations before RL (tiny 100; calculator 10 "
        "LoRA steps on gold episodes, merged; smollm2 arithmetic none).",
    )
    p.add_argument(
        "--heldout",
        type=positive_int,
        default=None,
        help="calculator: held-out questions, never trained on, played before and after RL (default 64).",
    )
    p.add_argument(
        "--control",
        choices=["none", "shuffled"],
        default="none",
        help="'shuffled': shuffle rewards within each group (the no-signal control).",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="Seed for model, warm-up, env and trainer.",
    )
    p.add_argument(
        "--threads", type=positive_int, help="torch threads per process (tiny 1, smollm2 2)."
    )
    p.add_argument(
        "--engine-refresh",
        choices=["keep", "drain"],
        default="keep",
        help="tiny on our engine: how a weight refresh meets the rows in flight: keep (swapped "
        "between two decode steps) or drain (the batch finishes on the old weights first: the "
        "former behaviour, for comparison).",
    )
    p.add_argument(
        "--inference",
        choices=["engine", "vllm"],
        default=None,
        help="Inference server: atroposlib's CPU engine (tiny's default), or a real vLLM server (its "
        "own Python: ATROPOS_VLLM_PYTHON or scripts/setup_vllm.sh; smollm2's only choice); tiny "
        "reloads full weights in place every step, smollm2 hot-loads a LoRA adapter.",
    )
    p.add_argument(
        "--schedule",
        choices=["auto", "overlap", "split", "turns"],
        default="auto",
        help="How generation and training share the machine. overlap: the env samples the next batch "
        "while the trainer trains (at most one batch ahead: up to one step of policy lag). split "
        "(smollm2): the same, with the cores divided: vLLM's workers on the first half, the trainer "
        "pinned to the rest. turns: the env waits for each step's weights (--env.on_policy: no lag), "
        "so generation and training alternate, each with every core. auto (default): split for "
        "smollm2's arithmetic task on 2 cores or more (measured fastest there), else overlap.",
    )
    p.add_argument(
        "--operands",
        type=non_negative_int,
        nargs=2,
        metavar=("LOW", "HIGH"),
        default=None,
        help="smollm2: operand range of the questions 'What is a + b?' (default 1 9; e.g. 10 99 for "
        "two-digit sums).",
    )
    p.add_argument(
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="Set one more trainer field (a TrainingConfig name, e.g. eps_high=0.2 or "
        "overlong=keep); repeatable. For experiments such as the control's variants: the demo's "
        "own flags (steps, lr, seed, control, ...) keep their own options.",
    )
    args = p.parse_args(argv)
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    if args.schedule == "auto":
        args.schedule = (
            "split"
            if args.model == "smollm2"
            and args.task == "arithmetic"
            and len(os.sched_getaffinity(0)) >= 2
            else "overlap"
        )
    if args.schedule == "split" and args.model != "smollm2":
        p.error("--schedule split applies to --model smollm2 (vLLM's worker threads are placed)")
    if args.schedule == "split" and len(os.sched_getaffinity(0)) < 2:
        p.error("--schedule split needs 2 CPU cores or more")
    if args.operands is not None:
        if args.model != "smollm2":
            p.error("--operands applies to --model smollm2 (the tiny model's task is fixed)")
        if args.operands[1] < args.operands[0]:
            p.error(f"--operands: HIGH ({args.operands[1]}) is below LOW ({args.operands[0]})")
    if args.task == "calculator" and args.model != "smollm2":
        p.error("--task calculator runs with --model smollm2")
    if args.heldout is not None and args.task != "calculator":
        p.error("--heldout is a setting of --task calculator")
    if args.model == "smollm2":
        if args.task == "calculator":
            from example_trainer.demo_calculator import DEFAULTS
        else:
            from example_trainer.demo_smollm2 import DEFAULTS

        defaults: dict[str, Any] = {**DEFAULTS, "threads": 2, "inference": "vllm"}
        if args.inference == "engine":
            p.error("--model smollm2 runs on a real vLLM server: use --inference vllm")
    else:
        defaults = {**TINY_DEFAULTS, "threads": 1, "inference": "engine"}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        name = "demo" if args.model == "tiny" else "demo-smollm2"
        name += "-calculator" if args.task == "calculator" else ""
        args.out = REPO / "runs" / (name + ("-control" if args.control == "shuffled" else ""))
    return args


# trainer fields the demo derives from its own flags or its layout: --trainer-set may not touch them
DEMO_OWNED_FIELDS = frozenset(
    {
        "model_name",
        "training_steps",
        "batch_size",
        "lr",
        "seed",
        "control",
        "save_path",
        "api_url",
        "weight_refresh",
        "device",
    }
)


def trainer_overrides(pairs: list[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` strings as validated trainer settings (values coerced as the trainer's config
    would); raises ``ValueError`` with one line naming the bad pair."""
    from pydantic import ValidationError

    from example_trainer.config import TrainingConfig

    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise ValueError(f"{pair!r} is not FIELD=VALUE")
        if name not in TrainingConfig.model_fields:
            raise ValueError(f"{name!r} is not a trainer field (see atropos-grpo --help)")
        if name in DEMO_OWNED_FIELDS:
            raise ValueError(f"{name!r} is set by the demo itself; use the demo's own flag")
        try:
            config = TrainingConfig.model_validate({"model_name": "m", name: raw})
        except ValidationError as e:
            reason = e.errors()[0]["msg"]
            raise ValueError(f"{name}={raw!r}: {reason}") from None
        values[name] = getattr(config, name)
    return values


def _child_settings(threads: int) -> dict[str, str]:
    """The environment variables every demo process gets: offline, quiet, ``threads`` threads."""
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads),
        "TRANSFORMERS_VERBOSITY": "error",
    }


def _child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_child_settings(threads))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def prepare_model(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """tiny: build the model and run the supervised warm-up; smollm2: import the model (once) and
    measure the base model on the held-out questions. Returns the paths and greedy accuracy."""
    if args.task == "calculator":
        from example_trainer import demo_calculator

        return demo_calculator.prepare(out, args)
    if args.model == "smollm2":
        from example_trainer import demo_smollm2

        return demo_smollm2.prepare(out, args)
    from example_trainer.demo_model import prepare

    return prepare(out / "model", args.warmup_sft_steps, args.seed, args.threads)


def demo_topology(args: argparse.Namespace, model_dir: Path, out: Path) -> Any:
    """The demo as a launch topology (for ``--model tiny`` the one configs/launch/demo_cpu.yaml
    describes, with the demo's flags filled in): run-api, the inference server, the env and the
    trainer."""
    from atroposlib.launch.topology import parse_topology

    # smollm2: one OpenMP thread for every process but those whose threads are placed (the trainer's
    # --torch-threads, vLLM's workers): vLLM's scheduler and the env otherwise spin-wait on cores the
    # trainer and the workers need (vLLM warns about it)
    side_threads = 1 if args.model == "smollm2" else args.threads
    env = {
        k: v
        for k, v in _child_env(side_threads).items()
        if k not in os.environ or k == "PYTHONPATH" or os.environ[k] != v
    }
    env.pop("PYTHONPATH", None)  # the launcher puts this checkout first
    if args.inference == "vllm":
        env["VLLM_CACHE_ROOT"] = str(out / "vllm-cache")
    if args.task == "calculator":
        from example_trainer import demo_calculator

        parts = demo_calculator.topology_parts(args, out, model_dir)
        env.update(parts.pop("env_vars"))
    elif args.model == "smollm2":
        from example_trainer import demo_smollm2

        parts = demo_smollm2.topology_parts(args, out)
        env.update(parts.pop("env_vars"))
    else:
        from example_trainer import demo_model

        parts = demo_model.topology_parts(args, model_dir, out, ENV_FILE)
    parts["trainer"]["flags"].update(args.trainer_set)
    return parse_topology(
        {
            "name": "demo",
            "env": env,
            **parts,
            # the demo is a short, watched run: a crash stops it (nothing is restarted)
            "supervision": {"max_restarts": 0},
        },
        source="atropos-demo",
    )


def first_last(values: list[float], k: int = 50) -> tuple[float, float]:
    first, last, _ = reward_change(values, k)
    return first, last


def reward_change(values: list[float], k: int = 50) -> tuple[float, float, int]:
    """(mean of the first k, mean of the last k, k): k shrinks to half of a shorter run, and the
    summary names the k really used (a 20-step run compares first-10 with last-10)."""
    k = max(1, min(k, len(values) // 2 or 1))
    return sum(values[:k]) / k, sum(values[-k:]) / k, k


def run(args: argparse.Namespace) -> int:
    """The demo: warm up a model here, then run the demo topology through the launcher's local
    backend (the code path ``atropos-launch run`` uses) and write the report."""
    from atroposlib.launch.local import LocalRun
    from atroposlib.launch.plan import build_plan
    from example_trainer.demo_smollm2 import kept_on
    from example_trainer.metrics import read_metrics

    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "logs").mkdir(parents=True)
    t_start = time.perf_counter()
    print(f"[demo] report folder: {out}", flush=True)
    if args.task == "calculator":
        print(
            "[demo] measuring SmolLM2-135M-Instruct on held-out calculator episodes ...", flush=True
        )
    elif args.model == "smollm2":
        print("[demo] measuring SmolLM2-135M-Instruct on the held-out questions ...", flush=True)
    else:
        print(
            "[demo] building a tiny model and warming it up on gold demonstrations ...", flush=True
        )
    prep = prepare_model(out, args)
    print(
        f"[demo] model ready in {prep['warm_s']:.1f}s: greedy accuracy {prep['warm_acc']:.2f}",
        flush=True,
    )
    plan = build_plan(demo_topology(args, prep["warm"], out), out, "local", gpus_here=0)
    runner = LocalRun(plan, topology_path="atropos-demo", say=lambda line: None)
    watch = _Watch(runner, args.steps)
    with kept_on(_launcher_cores(args)):
        code = runner.run(on_tick=watch.tick)
    if watch.tty:
        print(flush=True)
    if code != 0:
        failed = next((p.comp for p in runner.procs if p.state == "failed"), None)
        tail = _tail(out / failed.log) if failed is not None else ""
        raise SystemExit(f"[demo] {runner.message or 'stopped'}:\n{tail}")
    rows = read_metrics(plan.metrics_source)
    loop_s = time.perf_counter() - (watch.t_loop or t_start)
    return write_report(
        out, args, prep, rows, watch.early, watch.late, loop_s, time.perf_counter() - t_start
    )


def _final_accuracy(out: Path, args: argparse.Namespace, prep: dict[str, Any]) -> float:
    """Greedy accuracy of the trained policy: tiny on all 100 problems; smollm2 on the held-out
    questions (base model + last adapter), with every reply before and after written to
    ``heldout.jsonl``."""
    if args.model == "smollm2":
        from example_trainer.demo_smollm2 import final_accuracy

        acc, rows = final_accuracy(out, prep)
        with open(out / "heldout.jsonl", "w") as fh:
            for (question, before, ok0), (_, after, ok1) in zip(
                prep["base_replies"], rows, strict=True
            ):
                record = {"question": question, "base": before, "base_correct": ok0}
                fh.write(json.dumps({**record, "trained": after, "trained_correct": ok1}) + "\n")
        return acc
    from example_trainer.arithmetic_task import all_problems, score_completion
    from example_trainer.warmup import greedy_accuracy

    final_dir = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    return greedy_accuracy(final_dir, all_problems(), score_completion)


def _tail(path: Path, n: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


class _Watch:
    """The demo's live line (step, reward, tokens/s), and sampled groups read from the API early in
    the run and once the trainer has finished (before the launcher stops the API)."""

    def __init__(self, runner: Any, steps: int) -> None:
        self.runner, self.steps = runner, steps
        self.tty = sys.stdout.isatty()
        self.shown = self.bucket = 0
        self.t_loop: Optional[float] = None
        self.early: list[dict[str, Any]] = []
        self.late: list[dict[str, Any]] = []
        self.late_taken = False

    def tick(self, runner: Any) -> None:
        from example_trainer.metrics import read_metrics

        if self.t_loop is None:
            self.t_loop = time.perf_counter()
        rows = read_metrics(runner.plan.metrics_source)
        if rows and rows[-1]["step"] != self.shown:
            m = rows[-1]
            self.shown = m["step"]
            if not self.early and self.shown >= 3:  # the API keeps only recent groups
                self.early.extend(peek_groups(runner.api_url, after=0))
            line = (
                f"[demo] step {m['step']:>4}/{self.steps}  reward {m.get('reward_mean') or 0:.3f}  "
                f"tokens/s {m.get('tokens_per_s', 0):6.0f}  lag {m.get('policy_lag') or 0:.1f}"
            )
            if self.tty:
                print("\r" + line, end="", flush=True)
            elif self.shown // 25 > self.bucket or self.shown == self.steps:  # one line per 25
                self.bucket = self.shown // 25
                print(line, flush=True)
        trainer = runner.proc("trainer")
        if not self.late_taken and trainer is not None and trainer.poll() == 0:
            self.late_taken = True
            self.late.extend(peek_groups(runner.api_url, after=None))


def write_report(
    out: Path,
    args: argparse.Namespace,
    prep: dict[str, Any],
    rows: list[dict[str, Any]],
    early: list[dict[str, Any]],
    late: list[dict[str, Any]],
    loop_s: float,
    total_s: float,
) -> int:
    """Write summary.txt, the reward curve and the rollouts page; return the exit code."""
    from example_trainer.report import plot_curve, write_rollouts

    with open(out / "metrics.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    if args.task == "calculator":
        return _calculator_report(out, args, prep, rows, early, late, loop_s, total_s)
    rewards = [r["reward_mean"] for r in rows if r.get("reward_mean") is not None]
    smol = args.model == "smollm2"
    first, last, k = reward_change(rewards, 20 if smol else 50)
    target = 0.10 if smol else 0.15
    final_acc = _final_accuracy(out, args, prep)
    task = "chat arithmetic (SmolLM2-135M-Instruct, LoRA)" if smol else "single-digit addition"
    plot_curve(rows, out / "reward_curve.png", title=f"GRPO on {task} (control={args.control})")
    write_rollouts(early, late, out / "rollouts.html")
    gain = last - first
    server = "a real vLLM server" if args.inference == "vllm" else "the CPU inference engine"
    verdict = "improved" if gain >= target else f"did not improve by {target:.2f}"
    if smol:
        model = (
            f"The pretrained SmolLM2-135M-Instruct ({prep['n_params'] / 1e6:.0f}M parameters, its own "
            f"tokenizer and chat template) was trained with a rank-16 LoRA on every linear layer for "
            f"{len(rows)} GRPO steps ({args.prompts_per_step} prompts x {args.group_size} samples, lr "
            f"{args.lr}) through the real loop: run-api, {server} (the adapter hot-loaded in place after "
            f"every step; {refresh_times(rows)}), the chat-arithmetic environment"
        )
        runtime = "BaseEnv runtime, `serve`; free-text replies graded by their last integer"
        held = f"greedy accuracy on {len(prep['held_out'])} held-out questions"
    else:
        model = (
            f"A {prep['n_params'] / 1e6:.2f}M-parameter Llama built from scratch was warmed up with "
            f"{args.warmup_sft_steps} supervised steps on gold answers (greedy accuracy "
            f"{prep['warm_acc']:.2f}) and then trained for {len(rows)} GRPO steps "
            f"({args.prompts_per_step} prompts x {args.group_size} samples, lr {args.lr}) through the "
            f"real loop: run-api, {server} (weights reloaded in place after every step; "
            f"{refresh_times(rows)}), the arithmetic environment"
        )
        held = "greedy accuracy on all 100 problems"
        runtime = "BaseEnv runtime, `serve`"
    where = step_breakdown_line(rows, args)
    summary = (
        f"{model} ({runtime}) and the trainer as separate processes. "
        f"Control: {args.control}. Mean reward over the first {k} steps was {first:.3f} and over the last {k} "
        f"steps {last:.3f} (change {gain:+.3f}: {verdict}); {held} went from "
        f"{prep['warm_acc']:.2f} to {final_acc:.2f}. The RL loop took {loop_s:.0f} s; the whole demo {total_s:.0f} s."
        f" Where a trainer step went: {where}."
    )
    (out / "summary.txt").write_text(summary + "\n")
    figures = {
        "task": args.task,
        "model": "SmolLM2-135M-Instruct" if smol else "tiny Llama",
        "control": args.control,
        "trainer_set": args.trainer_set,
        "steps": len(rows),
        "reward_first": first,
        "reward_last": last,
        "reward_k": k,
        "heldout_base": prep["warm_acc"],
        "heldout_after": final_acc,
        "rl_wall_s": round(loop_s, 1),
    }
    (out / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"[demo] reward first-{k} mean {first:.3f}  last-{k} mean {last:.3f}  change {gain:+.3f}",
        flush=True,
    )
    print(
        f"[demo] greedy accuracy {prep['warm_acc']:.2f} -> {final_acc:.2f}; RL loop {loop_s:.0f}s, "
        f"total {total_s:.0f}s",
        flush=True,
    )
    print(f"[demo] {refresh_times(rows)}", flush=True)
    print(f"[demo] step time: {where}", flush=True)
    print(
        f"[demo] report: {out}/summary.txt, reward_curve.png, metrics.jsonl, rollouts.html",
        flush=True,
    )
    return 0


def trainer_dtype(args: argparse.Namespace) -> str:
    """The trainer's compute dtype in this demo (what the matmul peak is measured at)."""
    if args.model == "smollm2":
        from example_trainer.demo_smollm2 import TRAINER_DTYPE

        return TRAINER_DTYPE
    return "float32"


def step_breakdown_line(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Where the trainer's steps went (``step_timing.breakdown``, start-up step left out), against this
    machine's matmul peak measured now, at the trainer's thread count and compute dtype."""
    from example_trainer.flops import matmul_peak
    from example_trainer.step_timing import breakdown, format_breakdown

    b = breakdown(rows)
    if not b:
        return format_breakdown(b)
    dtype = trainer_dtype(args)
    threads = trainer_threads(args)
    peak = matmul_peak(dtype, threads=threads, seconds=1.0)
    return format_breakdown(b, peak, f" ({dtype}, {threads} thread(s), measured after the run)")


def _launcher_cores(args: argparse.Namespace) -> Optional[list[int]]:
    """Under the SmolLM2 ``split`` schedule, the cores everything but the trainer runs on."""
    if args.model != "smollm2":
        return None
    from example_trainer.demo_smollm2 import launcher_cores

    return launcher_cores(args.schedule, sorted(os.sched_getaffinity(0)))


def trainer_threads(args: argparse.Namespace) -> int:
    """The trainer's torch threads in this demo: ``--threads``, or under ``--schedule split`` one per
    core of its half (what the matmul peak is measured at)."""
    if args.model == "smollm2" and args.schedule == "split":
        from example_trainer.demo_smollm2 import placement

        _, flags = placement(args.schedule, args.threads, sorted(os.sched_getaffinity(0)))
        return int(flags["torch_threads"])
    return int(args.threads)


def _calculator_report(
    out: Path,
    args: argparse.Namespace,
    prep: dict[str, Any],
    rows: list[dict[str, Any]],
    early: list[dict[str, Any]],
    late: list[dict[str, Any]],
    loop_s: float,
    total_s: float,
) -> int:
    """The calculator preset's report: held-out episodes after RL, summary.json and summary.txt."""
    from example_trainer import demo_calculator
    from example_trainer.report import plot_curve, write_rollouts

    summary = demo_calculator.finish(out, args, prep, rows, loop_s)
    title = f"GRPO on calculator tool use (SmolLM2-135M-Instruct, LoRA; control={args.control})"
    plot_curve(rows, out / "reward_curve.png", title=title)
    write_rollouts(early, late, out / "rollouts.html")
    server = "a real vLLM server" if args.inference == "vllm" else "the CPU inference engine"
    text = demo_calculator.summary_text(summary, server, refresh_times(rows), total_s)
    (out / "summary.txt").write_text(text + "\n")
    print(
        f"[demo] report: {out}/summary.json, summary.txt, heldout_*.jsonl, reward_curve.png, "
        "metrics.jsonl, rollouts.html",
        flush=True,
    )
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if not ENV_FILE.exists():
        return fail(
            "atropos-demo", f"{ENV_FILE} is missing (run from a checkout of the repository)"
        )
    missing = vllm_missing() if args.inference == "vllm" else None
    if missing is None and args.model == "smollm2":
        from example_trainer.demo_smollm2 import smollm2_missing

        missing = smollm2_missing()
    if missing:
        return fail("atropos-demo", missing)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The default preset: a tiny Llama (~0.9M parameters, its own byte-level tokenizer) built from nothing,
warmed up on gold answers, learns single-digit addition on our CPU inference engine (or a real vLLM,
``--inference vllm``), its full weights reloaded in place after every step."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from demo.arithmetic_report import ArithmeticReport
from demo.common_sections import common_env_flags, env_section, run_trainer_flags
from demo.paths import ENVIRONMENTS
from demo.preset import Preset, RunResult, TopologyParts
from demo.report import refresh_times

ENV_FILE = ENVIRONMENTS / "arithmetic_server.py"
SERVED_NAME = "policy"
SEQ_LEN = 64
DEFAULTS = {
    "steps": 300,
    "prompts_per_step": 16,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 100,
    "threads": 1,
}


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Build the tiny model under ``out/model`` and run the supervised warm-up."""
    from demo.tiny_model import prepare as build_and_warm_up

    return build_and_warm_up(out / "model", args.warmup_sft_steps, args.seed, args.threads)


def _server(args: argparse.Namespace, model: str) -> dict[str, Any]:
    """Our engine (its threads, its refresh mode) or a real vLLM, serving the policy."""
    if args.inference == "vllm":
        server: dict[str, Any] = {"kind": "vllm", "args": ["--max-model-len", "256"]}
    else:
        engine_args = ["--torch-threads", str(args.threads), "--batch-window-ms", "10"]
        refresh = ["--refresh-mode", getattr(args, "engine_refresh", "keep")]
        server = {"kind": "engine", "args": engine_args + refresh}
    return {"name": "engine", "model": model, "served_name": SERVED_NAME, **server}


def topology_parts(args: argparse.Namespace, model_dir: Path, out: Path) -> TopologyParts:
    """The inference, env and trainer sections of the tiny-model run."""
    model = str(model_dir)
    env_flags = {
        **common_env_flags(args, model, out),
        "max_num_workers": args.prompts_per_step // 2,
    }
    trainer = {
        **run_trainer_flags(args, model, out, SEQ_LEN),
        "weight_refresh": "reload",
        "torch_threads": args.threads,
    }
    return TopologyParts(
        inference=[_server(args, model)],
        envs=[env_section("arithmetic", ENV_FILE, SERVED_NAME, env_flags)],
        trainer_flags=trainer,
    )


def final_accuracy(result: RunResult) -> float:
    """Greedy accuracy of the trainer's last weights on all 100 problems."""
    from atroposlib.utils.arithmetic_task import all_problems, score_completion
    from demo.warmup import greedy_accuracy

    final_dir = sorted((result.out / "trainer" / "weights").glob("step_*"))[-1]
    return greedy_accuracy(final_dir, all_problems(), score_completion)


def model_sentence(result: RunResult, server: str) -> str:
    args, prep, rows = result.args, result.prep, result.rows
    return (
        f"A {prep['n_params'] / 1e6:.2f}M-parameter Llama built from scratch was warmed up with "
        f"{args.warmup_sft_steps} supervised steps on gold answers (greedy accuracy "
        f"{prep['warm_acc']:.2f}) and then trained for {len(rows)} GRPO steps "
        f"({args.prompts_per_step} prompts x {args.group_size} samples, lr {args.lr}) through the "
        f"real loop: run-api, {server} (weights reloaded in place after every step; "
        f"{refresh_times(rows)}), the arithmetic environment"
    )


REPORT = ArithmeticReport(
    task_title="single-digit addition",
    model_name="tiny Llama",
    window=50,
    target=0.15,
    runtime="BaseEnv runtime, `serve`",
    model_sentence=model_sentence,
    held=lambda result: "greedy accuracy on all 100 problems",
    final_accuracy=final_accuracy,
)


PRESET = Preset(
    model="tiny",
    task="arithmetic",
    help="a 0.9M Llama built from scratch, warmed up, on raw single-digit addition",
    folder="demo",
    env_file=ENV_FILE,
    intro="building a tiny model and warming it up on gold demonstrations ...",
    defaults=DEFAULTS,
    prepare=prepare,
    topology_parts=topology_parts,
    report=REPORT,
)

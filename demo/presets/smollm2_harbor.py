"""The Harbor preset: SmolLM2-135M-Instruct learns shell chores in real sandboxes, scored by the tasks'
own verifiers.

``atropos-demo --model smollm2 --task harbor --inference vllm`` runs the SmolLM2 loop (run-api, a
real vLLM server with the trainer's LoRA hot-loaded after every step, the GRPO trainer) on the Harbor
env (``atroposlib.interop.harbor``) over the 40 shipped tasks RL trains on (``environments/
harbor_tasks/train``: count lines, find a file, rename, extract a CSV field, fix a one-line script; 8
of each): each episode
a multi-turn conversation with a ``shell`` tool through the managed server, its commands run in a
bubblewrap host sandbox of its own, its reward the task's ``tests/test.sh``.

1. **Measure the base model** on the 20 held-out tasks (other files, words and numbers; greedy
   episodes in the host sandbox, ``demo.harbor_episodes``). It never calls the tool (measured), so:
2. **Warm-up** (``--warmup-sft-steps``, its own row): a few LoRA steps on right episodes of the
   20 warm-up tasks (``environments/harbor_tasks/warmup``, which RL never plays), merged into the
   weights (``demo.harbor_warmup``): ``--warmup-compute-share`` of them (default 0.8) compute the answer with the
   task's reference command, the rest write down the answer of that very task (right there, blind
   on any other task). It teaches the tool's format and both ways to finish, and leaves to RL which
   one pays: on the tasks RL plays, as on the held-out ones, only computing does.
3. **Measure the RL starting point** on the held-out tasks, then run RL from it.
4. **Measure the end**: the starting point plus the trainer's last adapter (``demo.harbor_report``).

Besides the demo's report folder it writes ``heldout_base.jsonl``, ``heldout_rl_start.jsonl``,
``heldout_after.jsonl`` and ``summary.json`` (held-out task success at each point, the calculator
preset's fields: ``heldout_base``, ``heldout_rl_start``, ``heldout_after``, ``drifts``, ...). The env
writes each group it sends to ``groups.jsonl``, where the token-exactness check is read from.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any, Optional

from demo.common_sections import common_env_flags, env_section
from demo.harbor_heldout import (
    HELDOUT_TASKS,
    SEQ_LEN,
    TOKENS_PER_TURN,
    TRAIN_TASKS,
    WARMUP_TASKS,
    harbor_tasks,
    play_heldout,
    summary_line,
    system_prompt,
    write_episodes,
)
from demo.harbor_report import write_harbor_report
from demo.lora import (
    ADAPTER_NAME,
    LORA_ENV_VARS,
    LORA_MODULES,
    LORA_RANK,
    lora_trainer_flags,
    vllm_with_lora,
)
from demo.paths import REPO
from demo.preset import TopologyParts
from demo.smollm2 import MODEL_CACHE, ensure_model, smollm2_missing, smollm2_preset

ENV_FILE = REPO / "atroposlib" / "interop" / "harbor" / "__main__.py"
DEFAULTS = {
    "steps": 30,
    "prompts_per_step": 4,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 15,
    "threads": 2,
}
WARMUP_BATCH = 8
WARMUP_LR = 5e-4


def missing() -> Optional[str]:
    """Why this preset cannot run here: the SmolLM2 weights, or bubblewrap for the host sandbox."""
    from atroposlib.interop.harbor.bwrap import missing_bwrap

    return smollm2_missing() or missing_bwrap()


def warm_up(out: Path, args: argparse.Namespace) -> tuple[Path, list[float]]:
    """``args.warmup_sft_steps`` LoRA steps on right episodes of the warm-up tasks, merged;
    (model, losses)."""
    from demo.chat_sft import lora_model, save_merged, sft_steps
    from demo.harbor_warmup import compute_share, sampler, warmup_episodes

    episodes = warmup_episodes(harbor_tasks(WARMUP_TASKS), system_prompt(), out / "trials")
    model, tok = lora_model(MODEL_CACHE, LORA_RANK, LORA_MODULES)
    _, losses = sft_steps(
        model,
        tok,
        sampler(episodes, compute_share(args)),
        steps=args.warmup_sft_steps,
        batch_size=WARMUP_BATCH,
        lr=WARMUP_LR,
        seed=args.seed,
    )
    return save_merged(model, tok, out / "model" / "warm"), losses


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Import the model (once), measure it, warm it up, measure the RL starting point."""
    from demo.harbor_episodes import summarize
    from demo.harbor_warmup import compute_share
    from demo.model_size import checkpoint_params

    ensure_model()
    trials = out / "trials"
    t0 = time.perf_counter()
    base = play_heldout(MODEL_CACHE, trials)
    write_episodes(out / "heldout_base.jsonl", base)
    print(
        f"[demo] base model on {len(base)} held-out tasks: {summary_line(summarize(base))}",
        flush=True,
    )
    start, start_eps = MODEL_CACHE, base
    losses: list[float] = []
    if args.warmup_sft_steps > 0:
        print(
            f"[demo] warm-up: {args.warmup_sft_steps} LoRA steps on right episodes of the warm-up "
            f"tasks ({compute_share(args):.0%} computing the answer, the rest writing it down) ...",
            flush=True,
        )
        start, losses = warm_up(out, args)
        start_eps = play_heldout(start, trials)
        print(f"[demo] RL starting point: {summary_line(summarize(start_eps))}", flush=True)
    write_episodes(out / "heldout_rl_start.jsonl", start_eps)
    return {
        "warm": start,
        "warm_acc": summarize(start_eps)["success"],
        "warm_s": time.perf_counter() - t0,
        "n_params": checkpoint_params(MODEL_CACHE),
        "base": summarize(base),
        "rl_start": summarize(start_eps),
        "heldout_tasks": len(base),
        "warmup_losses": losses,
    }


def topology_parts(args: argparse.Namespace, model_dir: Path, out: Path) -> TopologyParts:
    """The inference, env and trainer sections of the harbor run (the demo adds the rest)."""
    model = str(model_dir)
    env_flags = {
        **common_env_flags(args, model, out),
        "max_token_length": SEQ_LEN,
        "data_path_to_save_groups": str(out / "groups.jsonl"),
    }
    env = env_section("harbor", ENV_FILE, ADAPTER_NAME, env_flags, {"min_tokens_per_second": 0.25})
    env["flags"]["harbor"] = {
        "tasks": str(TRAIN_TASKS),
        "eval_tasks": str(HELDOUT_TASKS),
        "sandbox": "host",
        "trials_dir": str(out / "trials"),
        "max_tokens_per_turn": TOKENS_PER_TURN,
        "temperature": 1.0,
    }
    trainer = {
        **lora_trainer_flags(args, model, out, seq_len=SEQ_LEN),
        "torch_threads": args.threads,
        "micro_batch_tokens": 8 * SEQ_LEN,  # 8 episodes a micro-batch, as the calculator preset
        # a group's 8 episodes share their prompt, so prefix sharing packs them into one row; once
        # the policy writes longer commands (grep | cut, sed -i) such rows kept activations of 13 GB
        # and the trainer was OOM-killed mid-run (twice, at steps 15 and 18): recompute them
        "gradient_checkpointing": True,
    }
    return TopologyParts(
        inference=[vllm_with_lora(model, max_model_len=512)],
        envs=[env],
        trainer_flags=trainer,
        env_vars=dict(LORA_ENV_VARS),
    )


PRESET = dataclasses.replace(
    smollm2_preset(
        "harbor",
        help="SmolLM2-135M-Instruct learns shell chores on Harbor tasks (a shell tool, each episode in "
        "its own bubblewrap sandbox, the task's verifier as reward), after a few LoRA warm-up steps",
        folder="demo-smollm2-harbor",
        env_file=ENV_FILE,
        intro="measuring SmolLM2-135M-Instruct on the held-out Harbor tasks ...",
        defaults=DEFAULTS,
        prepare=prepare,
        topology_parts=topology_parts,
        report=write_harbor_report,
        settings=frozenset({"warmup_compute_share"}),
    ),
    missing=missing,
)

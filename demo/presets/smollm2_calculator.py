"""The multi-turn tool-use preset: SmolLM2-135M-Instruct learns to use a calculator.

``atropos-demo --model smollm2 --task calculator --inference vllm`` runs the SmolLM2 loop (run-api, a
real vLLM server with the trainer's LoRA hot-loaded after every step, the GRPO trainer) on
``environments/calculator_tool_env.py``: multiplications the model cannot do in its head, a
``calculator`` tool in the Hermes format, episodes of several turns through the managed server.

1. **Measure the base model** on the held-out questions (greedy episodes, transformers: see
   ``demo.tool_episodes``). It never writes a ``<tool_call>`` (measured), so:
2. **Warm-up** (``--warmup-sft-steps``, its own row in the results): a few LoRA steps on right episodes
   the env's task generates, merged into the weights (``demo.chat_sft``): ``WARMUP_TOOL_SHARE`` of them
   call the tool (the call, its result, the answer), the rest answer directly (right). The base model
   always answers directly; the warm-up teaches the tool's format and leaves which way pays to RL (on
   pure tool episodes 5 steps already reached 0.73 held-out success, leaving RL little to show).
3. **Measure the RL starting point** on the same held-out questions, then run RL from it.
4. **Measure the end**: the starting point plus the trainer's last adapter (``demo.calculator_report``).

Besides the demo's report folder, it writes ``heldout_base.jsonl``, ``heldout_rl_start.jsonl`` and
``heldout_after.jsonl`` (every held-out episode: its record and transcript) and ``summary.json``
(held-out success, valid tool-call share and mean turns at each point, the training episodes'
outcomes, the token-exactness count over every sequence the env sent, ``rl_wall_s``). The env writes
each group it sends to ``groups.jsonl`` (``--env.data_path_to_save_groups``), which is where the
token-exactness check is read from (``demo.token_exactness``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.calculator_heldout import (
    HELD_OUT,
    MAX_TURNS,
    SEQ_LEN,
    TOKENS_PER_TURN,
    calc_split,
    play_heldout,
    summary_line,
    system_prompt,
    write_episodes,
)
from demo.calculator_report import write_calculator_report
from demo.common_sections import common_env_flags, env_section
from demo.lora import (
    ADAPTER_NAME,
    LORA_ENV_VARS,
    LORA_MODULES,
    LORA_RANK,
    lora_trainer_flags,
    vllm_with_lora,
)
from demo.paths import ENVIRONMENTS
from demo.preset import TopologyParts
from demo.smollm2 import MODEL_CACHE, ensure_model, smollm2_preset

if TYPE_CHECKING:  # the toolkit is imported where it is used: the registry loads every preset
    from atroposlib.envkit.calculator_task import CalcSplit

ENV_FILE = ENVIRONMENTS / "calculator_tool_env.py"
DEFAULTS = {
    "steps": 30,
    "prompts_per_step": 4,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 10,
    "threads": 2,
    "heldout": HELD_OUT,
}
WARMUP_BATCH = 8
WARMUP_LR = 5e-4
WARMUP_TOOL_SHARE = 0.3
"""Share of the warm-up's gold episodes that use the tool; the rest answer directly (right)."""


def warm_up(
    out: Path, args: argparse.Namespace, split: CalcSplit, wrap_tool_results: bool = True
) -> tuple[Path, list[float]]:
    """``args.warmup_sft_steps`` LoRA steps on gold episodes, merged; (model folder, losses).
    ``wrap_tool_results``: the tool results in ``<tool_response>`` tags, as the env sends them to a
    template that ignores ``tools=`` (an agent program sends them as they are)."""
    from atroposlib.envkit.calculator_task import direct_transcript, gold_transcript
    from demo.chat_sft import lora_model, save_merged, sft_steps

    system = system_prompt()

    def sample(rng: Any, n: int) -> list[list[dict[str, Any]]]:
        out = []
        for _ in range(n):
            problem = split.train_problem(rng)
            tool = rng.random() < WARMUP_TOOL_SHARE
            out.append(
                gold_transcript(problem, system, wrap_tool_results)
                if tool
                else direct_transcript(problem, system)
            )
        return out

    model, tok = lora_model(MODEL_CACHE, LORA_RANK, LORA_MODULES)
    _, losses = sft_steps(
        model,
        tok,
        sample,
        steps=args.warmup_sft_steps,
        batch_size=WARMUP_BATCH,
        lr=WARMUP_LR,
        seed=args.seed,
    )
    return save_merged(model, tok, out / "model" / "warm"), losses


def prepare(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Import the model (once), measure it, warm it up, measure the RL starting point."""
    return prepare_episodes(out, args, wrap_tool_results=True)


def prepare_episodes(
    out: Path, args: argparse.Namespace, wrap_tool_results: bool
) -> dict[str, Any]:
    """``prepare`` for episodes whose tool results are wrapped or not (``warm_up``)."""
    from demo.model_size import checkpoint_params
    from demo.tool_episodes import summarize

    ensure_model()
    split = calc_split(args)
    t0 = time.perf_counter()
    base = play_heldout(MODEL_CACHE, split, wrap_tool_results=wrap_tool_results)
    write_episodes(out / "heldout_base.jsonl", base)
    print(
        f"[demo] base model on {len(base)} held-out questions: {summary_line(summarize(base))}",
        flush=True,
    )
    start, start_eps = MODEL_CACHE, base
    losses: list[float] = []
    if args.warmup_sft_steps > 0:
        print(
            f"[demo] warm-up: {args.warmup_sft_steps} LoRA steps on right episodes the env generates "
            f"({WARMUP_TOOL_SHARE:.0%} with the tool) ...",
            flush=True,
        )
        start, losses = warm_up(out, args, split, wrap_tool_results)
        start_eps = play_heldout(start, split, wrap_tool_results=wrap_tool_results)
        print(f"[demo] RL starting point: {summary_line(summarize(start_eps))}", flush=True)
    write_episodes(out / "heldout_rl_start.jsonl", start_eps)
    return {
        "warm": start,
        "warm_acc": summarize(start_eps)["success"],
        "warm_s": time.perf_counter() - t0,
        "n_params": checkpoint_params(MODEL_CACHE),
        "split": split,
        "base": summarize(base),
        "rl_start": summarize(start_eps),
        "warmup_losses": losses,
        "wrap_tool_results": wrap_tool_results,
    }


def topology_parts(args: argparse.Namespace, model_dir: Path, out: Path) -> TopologyParts:
    """The inference, env and trainer sections of the calculator run (the demo adds the rest)."""
    model = str(model_dir)
    env_flags = {
        **common_env_flags(args, model, out),
        "held_out": args.heldout,
        "max_turns": MAX_TURNS,
        "max_tokens_per_turn": TOKENS_PER_TURN,
        "max_token_length": SEQ_LEN,
        "temperature": 1.0,
        "data_path_to_save_groups": str(out / "groups.jsonl"),
    }
    # 32 sessions share vLLM's one CPU worker: measured 14 tokens/s in all with the LoRA (0.44 per
    # request), so a 48-token turn takes ~110 s, past the default per-request limit (60 s + 48 / 4
    # tokens/s = 72 s)
    openai = {"min_tokens_per_second": 0.25}
    trainer = {
        **lora_trainer_flags(args, model, out, seq_len=SEQ_LEN),
        "torch_threads": args.threads,
        # 8 episodes of SEQ_LEN tokens per micro-batch: all 32 at once held 14 GB of activations
        # (fp32) and the first full run was OOM-killed on a 23 GB machine
        "micro_batch_tokens": 8 * SEQ_LEN,
    }
    return TopologyParts(
        inference=[vllm_with_lora(model, max_model_len=512)],
        envs=[env_section("calculator", ENV_FILE, ADAPTER_NAME, env_flags, openai)],
        trainer_flags=trainer,
        env_vars=dict(LORA_ENV_VARS),
    )


PRESET = smollm2_preset(
    "calculator",
    help="SmolLM2-135M-Instruct learns multi-turn tool use: multiplications solved with a "
    "calculator tool, after a few LoRA warm-up steps on gold episodes",
    folder="demo-smollm2-calculator",
    env_file=ENV_FILE,
    intro="measuring SmolLM2-135M-Instruct on held-out calculator episodes ...",
    defaults=DEFAULTS,
    prepare=prepare,
    topology_parts=topology_parts,
    report=write_calculator_report,
    settings=frozenset({"heldout"}),
)

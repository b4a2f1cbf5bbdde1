"""The multi-turn tool-use preset of the demo: SmolLM2-135M-Instruct learns to use a calculator.

``atropos-demo --model smollm2 --task calculator --inference vllm`` runs the SmolLM2 loop (run-api, a
real vLLM server with the trainer's LoRA hot-loaded after every step, the GRPO trainer) on
``environments/calculator_tool_env.py``: multiplications the model cannot do in its head, a
``calculator`` tool in the Hermes format, episodes of several turns through the managed server.

1. **Measure the base model** on the held-out questions (greedy episodes, transformers: see
   ``tool_episodes``). It never writes a ``<tool_call>`` (measured), so:
2. **Warm-up** (``--warmup-sft-steps``, its own row in the results): a few LoRA steps on right episodes
   the env's task generates, merged into the weights (``chat_sft``): ``WARMUP_TOOL_SHARE`` of them call
   the tool (the call, its result, the answer), the rest answer directly (right). The base model always
   answers directly; the warm-up teaches the tool's format and leaves which way pays to RL (on pure
   tool episodes 5 steps already reached 0.73 held-out success, leaving RL little to show).
3. **Measure the RL starting point** on the same held-out questions, then run RL from it.
4. **Measure the end**: the starting point plus the trainer's last adapter.

Besides the demo's report folder, it writes ``heldout_base.jsonl``, ``heldout_rl_start.jsonl`` and
``heldout_after.jsonl`` (every held-out episode: its record and transcript) and ``summary.json``
(held-out success, valid tool-call share and mean turns at each point, the training episodes'
outcomes, the token-exactness count over every sequence the env sent, ``rl_wall_s``). The env writes
each group it sends to ``groups.jsonl`` (``--env.data_path_to_save_groups``), which is where the
token-exactness check is read from.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from atroposlib.envkit.calculator_task import (
    CalcSplit,
    Episode,
    direct_transcript,
    gold_transcript,
    split_problems,
    tool_system_prompt,
)
from atroposlib.envkit.tool_calls import TOOLBOX
from example_trainer.demo_smollm2 import (
    ADAPTER_NAME,
    LORA_MODULES,
    LORA_RANK,
    MODEL_CACHE,
    REPO,
    lora_trainer_flags,
    vllm_with_lora,
)

ENV_FILE = REPO / "environments" / "calculator_tool_env.py"
TOOLS = {"calculator": TOOLBOX["calculator"]}
HELD_OUT = 64
MAX_TURNS = 3
TOKENS_PER_TURN = 48
SEQ_LEN = 320
DEFAULTS = {
    "steps": 30,
    "prompts_per_step": 4,
    "group_size": 8,
    "lr": 5e-4,
    "warmup_sft_steps": 10,
    "heldout": HELD_OUT,
}
WARMUP_BATCH = 8
WARMUP_LR = 5e-4
WARMUP_TOOL_SHARE = 0.3
"""Share of the warm-up's gold episodes that use the tool; the rest answer directly (right)."""


def _split(args: argparse.Namespace) -> CalcSplit:
    return split_problems(args.heldout, args.seed)  # the env's ranges: a in 10..999, b in 10..99


def _system() -> str:
    return tool_system_prompt(list(TOOLS.values()))


def play_heldout(
    model_dir: Path, split: CalcSplit, adapter_dir: Path | None = None
) -> list[Episode]:
    """Greedy episodes of ``model_dir`` (+ ``adapter_dir``) on the held-out questions."""
    from example_trainer.tool_episodes import load_chat_policy, play_episodes

    model, tok = load_chat_policy(model_dir, adapter_dir)
    return play_episodes(
        model,
        tok,
        split.held_out,
        _system(),
        TOOLS,
        max_turns=MAX_TURNS,
        max_new_tokens=TOKENS_PER_TURN,
        max_length=SEQ_LEN,
    )


def write_episodes(path: Path, episodes: list[Episode]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for e in episodes:
            fh.write(json.dumps({**e.record(), "transcript": e.transcript}) + "\n")


def warm_up(out: Path, args: argparse.Namespace, split: CalcSplit) -> tuple[Path, list[float]]:
    """``args.warmup_sft_steps`` LoRA steps on gold episodes, merged; (model folder, losses)."""
    from example_trainer.chat_sft import lora_model, save_merged, sft_steps

    system = _system()

    def sample(rng: Any, n: int) -> list[list[dict[str, Any]]]:
        out = []
        for _ in range(n):
            problem = split.train_problem(rng)
            tool = rng.random() < WARMUP_TOOL_SHARE
            out.append(
                gold_transcript(problem, system) if tool else direct_transcript(problem, system)
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
    from example_trainer.demo_model import checkpoint_params
    from example_trainer.demo_smollm2 import ensure_model
    from example_trainer.tool_episodes import summarize

    ensure_model()
    split = _split(args)
    t0 = time.perf_counter()
    base = play_heldout(MODEL_CACHE, split)
    write_episodes(out / "heldout_base.jsonl", base)
    print(
        f"[demo] base model on {len(base)} held-out questions: {_line(summarize(base))}", flush=True
    )
    start, start_eps = MODEL_CACHE, base
    losses: list[float] = []
    if args.warmup_sft_steps > 0:
        print(
            f"[demo] warm-up: {args.warmup_sft_steps} LoRA steps on right episodes the env generates "
            f"({WARMUP_TOOL_SHARE:.0%} with the tool) ...",
            flush=True,
        )
        start, losses = warm_up(out, args, split)
        start_eps = play_heldout(start, split)
        print(f"[demo] RL starting point: {_line(summarize(start_eps))}", flush=True)
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
    }


def _line(s: dict[str, float]) -> str:
    return (
        f"success {s['success']:.2f}, valid tool calls {s['valid_tool_calls']:.2f}, "
        f"mean turns {s['mean_turns']:.2f}"
    )


def topology_parts(args: argparse.Namespace, out: Path, model_dir: Path) -> dict[str, Any]:
    """The inference, env and trainer sections of the calculator run (the demo adds the rest)."""
    model = str(model_dir)
    return {
        "inference": [vllm_with_lora(model, max_model_len=512)],
        "env_vars": {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
        "envs": [
            {
                "name": "calculator",
                "file": str(ENV_FILE),
                "flags": {
                    "env": {
                        "tokenizer_name": model,
                        "group_size": args.group_size,
                        "max_batches_offpolicy": 1,
                        "total_steps": args.steps,
                        "seed": args.seed,
                        "held_out": args.heldout,
                        "max_turns": MAX_TURNS,
                        "max_tokens_per_turn": TOKENS_PER_TURN,
                        "max_token_length": SEQ_LEN,
                        "temperature": 1.0,
                        "spool_dir": str(out / "spool"),
                        "max_num_workers": args.prompts_per_step,
                        "data_path_to_save_groups": str(out / "groups.jsonl"),
                    },
                    "openai": {
                        "api_key": "x",
                        "model_name": ADAPTER_NAME,
                        "server_type": "vllm",
                        # 32 sessions share vLLM's one CPU worker: measured 14 tokens/s in all with
                        # the LoRA (0.44 per request), so a 48-token turn takes ~110 s, past the
                        # default per-request limit (60 s + 48 / 4 tokens/s = 72 s)
                        "min_tokens_per_second": 0.25,
                    },
                },
            }
        ],
        "trainer": {
            "flags": {
                **lora_trainer_flags(args, model, out, seq_len=SEQ_LEN),
                "torch_threads": args.threads,
                # 8 episodes of SEQ_LEN tokens per micro-batch: all 32 at once held 14 GB of
                # activations (fp32) and the first full run was OOM-killed on a 23 GB machine
                "micro_batch_tokens": 8 * SEQ_LEN,
            }
        },
    }


_MANAGED_LINE = re.compile(r"managed sessions: (\d+) managed session\(s\), (\d+) token drift\(s\)")


def managed_counts(log: Path) -> dict[str, Any]:
    """The env's own last word on its managed sessions (``serve``'s ``managed sessions: ...`` line):
    sessions opened and token drifts the managed server counted (re-rendering the conversation would
    not give the tokens the model saw; the exact tokens are kept). None where the line is missing."""
    text = log.read_text(errors="replace") if log.exists() else ""
    found = _MANAGED_LINE.findall(text)
    if not found:
        return {"managed_sessions": None, "managed_token_drifts": None}
    sessions, drifts = found[-1]
    return {"managed_sessions": int(sessions), "managed_token_drifts": int(drifts)}


def training_episodes(out: Path) -> dict[str, Any]:
    """What the env's groups file says about training: outcomes, and the token-exactness check over
    every sequence it sent (``drifts``: sequences whose tokens differ from what vLLM saw and said)."""
    path = out / "groups.jsonl"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    groups = [json.loads(line) for line in text.split("\n") if line.strip()]
    outcomes: Counter[str] = Counter()
    checked = drifts = 0
    for group in groups:
        for over in group.get("overrides") or []:
            checked += 1
            drifts += not over.get("token_exact", False)
            outcomes[over.get("episode", {}).get("outcome", "unknown")] += 1
    return {"sequences_checked": checked, "drifts": drifts, "outcomes": dict(outcomes)}


def finish(
    out: Path,
    args: argparse.Namespace,
    prep: dict[str, Any],
    rows: list[dict[str, Any]],
    loop_s: float,
) -> dict[str, Any]:
    """Measure the end of RL, write the held-out episodes and ``summary.json``; return the summary."""
    from example_trainer.tool_episodes import summarize

    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    after_eps = play_heldout(Path(prep["warm"]), prep["split"], adapter)
    write_episodes(out / "heldout_after.jsonl", after_eps)
    after = summarize(after_eps)
    base, start = prep["base"], prep["rl_start"]
    train = training_episodes(out)
    summary = {
        "task": "calculator",
        "model": "SmolLM2-135M-Instruct",
        "control": args.control,
        "trainer_set": args.trainer_set,
        "steps": len(rows),
        "prompts_per_step": args.prompts_per_step,
        "group_size": args.group_size,
        "lr": args.lr,
        "seed": args.seed,
        "warmup_sft_steps": args.warmup_sft_steps,
        "heldout_questions": len(prep["split"].held_out),
        "heldout_base": base["success"],
        "heldout_rl_start": start["success"],
        "heldout_after": after["success"],
        "heldout_gain": after["success"] - start["success"],
        "valid_tool_calls_base": base["valid_tool_calls"],
        "valid_tool_calls_before": start["valid_tool_calls"],
        "valid_tool_calls_after": after["valid_tool_calls"],
        "mean_turns_base": base["mean_turns"],
        "mean_turns_before": start["mean_turns"],
        "mean_turns_after": after["mean_turns"],
        "drifts": train["drifts"],
        "sequences_checked": train["sequences_checked"],
        **managed_counts(out / "logs" / "env-calculator-0.log"),
        "training_outcomes": train["outcomes"],
        "reward_per_step": [r.get("reward_mean") for r in rows],
        "rl_wall_s": round(loop_s, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"[demo] held-out base:     {_line(base)}", flush=True)
    print(f"[demo] held-out RL start: {_line(start)}", flush=True)
    print(f"[demo] held-out after RL: {_line(after)}", flush=True)
    print(
        f"[demo] token-exactness: {train['drifts']} drift(s) in {train['sequences_checked']} "
        f"trained sequences; RL loop {loop_s:.0f}s",
        flush=True,
    )
    return summary


def summary_text(summary: dict[str, Any], server: str, refresh: str, total_s: float) -> str:
    """The paragraph of ``summary.txt``."""
    return (
        f"SmolLM2-135M-Instruct learned a multi-turn calculator task: {summary['warmup_sft_steps']} "
        f"supervised warm-up steps on gold episodes, then {summary['steps']} GRPO steps "
        f"({summary['prompts_per_step']} prompts x {summary['group_size']} episodes, lr {summary['lr']}, "
        f"control {summary['control']}) through the real loop: run-api, {server} (a rank-{LORA_RANK} LoRA "
        f"hot-loaded after every step; {refresh}), the calculator env on the managed server's Hermes tool "
        f"parser, and the trainer. Greedy success on {summary['heldout_questions']} held-out questions: "
        f"base {summary['heldout_base']:.2f}, RL start {summary['heldout_rl_start']:.2f}, after RL "
        f"{summary['heldout_after']:.2f} (change {summary['heldout_gain']:+.2f}); episodes with a valid "
        f"tool call {summary['valid_tool_calls_before']:.2f} -> {summary['valid_tool_calls_after']:.2f}; "
        f"mean turns {summary['mean_turns_before']:.2f} -> {summary['mean_turns_after']:.2f}. "
        f"Token-exactness: {summary['drifts']} drift(s) in {summary['sequences_checked']} sequences. "
        f"The RL loop took {summary['rl_wall_s']:.0f} s; the whole demo {total_s:.0f} s."
    )

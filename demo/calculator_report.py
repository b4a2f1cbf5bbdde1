"""The calculator preset's report: the held-out episodes after RL (the RL starting point plus the
trainer's last adapter), ``summary.json`` (held-out success, valid tool-call share and mean turns at
base, RL start and after; the training episodes' outcomes; the token-exactness count), ``summary.txt``,
the curve and the rollouts page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from demo.calculator_heldout import play_heldout, summary_line, write_episodes
from demo.lora import LORA_RANK
from demo.preset import RunResult
from demo.report import refresh_times, server_phrase, write_curve_and_rollouts
from demo.token_exactness import episode_outcomes, managed_counts, training_episodes


def write_calculator_report(result: RunResult) -> int:
    """Measure the end of RL, write the summaries, the curve and the rollouts; returns 0."""
    summary = finish(result)
    title = (
        f"GRPO on calculator tool use (SmolLM2-135M-Instruct, LoRA; control={result.args.control})"
    )
    write_curve_and_rollouts(result, title)
    server = server_phrase(result.args)
    text = summary_text(summary, server, refresh_times(result.rows), result.total_s)
    (result.out / "summary.txt").write_text(text + "\n")
    print(
        f"[demo] report: {result.out}/summary.json, summary.txt, heldout_*.jsonl, reward_curve.png, "
        "metrics.jsonl, rollouts.html",
        flush=True,
    )
    return 0


def finish(result: RunResult) -> dict[str, Any]:
    """Measure the end of RL, write the held-out episodes and ``summary.json``; return the summary."""
    from demo.tool_episodes import summarize

    out, prep = result.out, result.prep
    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    wrap = prep.get("wrap_tool_results", True)
    after_eps = play_heldout(Path(prep["warm"]), prep["split"], adapter, wrap_tool_results=wrap)
    write_episodes(out / "heldout_after.jsonl", after_eps)
    after = summarize(after_eps)
    train = training_episodes(out)
    summary = _summary(result, after, train)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"[demo] held-out base:     {summary_line(prep['base'])}", flush=True)
    print(f"[demo] held-out RL start: {summary_line(prep['rl_start'])}", flush=True)
    print(f"[demo] held-out after RL: {summary_line(after)}", flush=True)
    print(
        f"[demo] token-exactness: {train['drifts']} drift(s) in {train['sequences_checked']} "
        f"trained sequences; RL loop {result.loop_s:.0f}s",
        flush=True,
    )
    return summary


def _summary(result: RunResult, after: dict[str, float], train: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``summary.json``."""
    args, prep, rows = result.args, result.prep, result.rows
    base, start = prep["base"], prep["rl_start"]
    return {
        "task": result.preset.task,
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
        **managed_counts(result.out / "logs" / "env-calculator-0.log"),
        "training_outcomes": train["outcomes"],
        "training_overlong": train["overlong"],
        "episode_outcomes": episode_outcomes(result.out / "logs" / "env-calculator-0.log"),
        "reward_per_step": [r.get("reward_mean") for r in rows],
        "rl_wall_s": round(result.loop_s, 1),
    }


def summary_text(summary: dict[str, Any], server: str, refresh: str, total_s: float) -> str:
    """The paragraph of ``summary.txt``."""
    env = (
        "an unmodified OpenAI Agents SDK agent through the managed-server proxy (the agent harness)"
        if summary["task"] == "calculator-agent"
        else "the calculator env on the managed server's Hermes tool parser"
    )
    return (
        f"SmolLM2-135M-Instruct learned a multi-turn calculator task: {summary['warmup_sft_steps']} "
        f"supervised warm-up steps on gold episodes, then {summary['steps']} GRPO steps "
        f"({summary['prompts_per_step']} prompts x {summary['group_size']} episodes, lr {summary['lr']}, "
        f"control {summary['control']}) through the real loop: run-api, {server} (a rank-{LORA_RANK} LoRA "
        f"hot-loaded after every step; {refresh}), {env}, and the trainer. Greedy success on {summary['heldout_questions']} held-out questions: "
        f"base {summary['heldout_base']:.2f}, RL start {summary['heldout_rl_start']:.2f}, after RL "
        f"{summary['heldout_after']:.2f} (change {summary['heldout_gain']:+.2f}); episodes with a valid "
        f"tool call {summary['valid_tool_calls_before']:.2f} -> {summary['valid_tool_calls_after']:.2f}; "
        f"mean turns {summary['mean_turns_before']:.2f} -> {summary['mean_turns_after']:.2f}. "
        f"Token-exactness: {summary['drifts']} drift(s) in {summary['sequences_checked']} sequences. "
        f"The RL loop took {summary['rl_wall_s']:.0f} s; the whole demo {total_s:.0f} s."
    )

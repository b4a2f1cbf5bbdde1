"""The harbor preset's report: the held-out episodes after RL (the RL starting point plus the trainer's
last adapter), ``summary.json`` (held-out task success, valid tool-call share and mean turns at base,
RL start and after; the training episodes' outcomes and unscored episodes; the token-exactness
count), ``summary.txt``, the curve and the rollouts page."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from demo.harbor_heldout import play_heldout, summary_line, write_episodes
from demo.lora import LORA_RANK
from demo.preset import RunResult
from demo.report import refresh_times, server_phrase, write_curve_and_rollouts
from demo.token_exactness import managed_counts, training_episodes


def write_harbor_report(result: RunResult) -> int:
    """Measure the end of RL, write the summaries, the curve and the rollouts; returns 0."""
    summary = finish(result)
    title = f"GRPO on Harbor tasks (SmolLM2-135M-Instruct, LoRA; control={result.args.control})"
    write_curve_and_rollouts(result, title)
    text = summary_text(
        summary, server_phrase(result.args), refresh_times(result.rows), result.total_s
    )
    (result.out / "summary.txt").write_text(text + "\n")
    print(
        f"[demo] report: {result.out}/summary.json, summary.txt, heldout_*.jsonl, reward_curve.png, "
        "metrics.jsonl, rollouts.html",
        flush=True,
    )
    return 0


def unscored_training_episodes(out: Path) -> dict[str, int]:
    """Training episodes whose reward was unavailable, by the failure's kind (from groups.jsonl)."""
    path = out / "groups.jsonl"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    kinds: Counter[str] = Counter()
    for line in text.split("\n"):
        if line.strip():
            for over in json.loads(line).get("overrides") or []:
                failure = (over.get("episode") or {}).get("failure")
                if failure:
                    kinds[failure] += 1
    return dict(kinds)


def finish(result: RunResult) -> dict[str, Any]:
    """Measure the end of RL, write the held-out episodes and ``summary.json``; return the summary."""
    from demo.harbor_episodes import summarize

    out, prep = result.out, result.prep
    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    after_eps = play_heldout(Path(prep["warm"]), out / "trials", adapter)
    write_episodes(out / "heldout_after.jsonl", after_eps)
    after = summarize(after_eps)
    summary = _summary(result, after, training_episodes(out))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"[demo] held-out base:     {summary_line(prep['base'])}", flush=True)
    print(f"[demo] held-out RL start: {summary_line(prep['rl_start'])}", flush=True)
    print(f"[demo] held-out after RL: {summary_line(after)}", flush=True)
    print(
        f"[demo] token-exactness: {summary['drifts']} drift(s) in {summary['sequences_checked']} "
        f"trained sequences; RL loop {result.loop_s:.0f}s",
        flush=True,
    )
    return summary


def _summary(result: RunResult, after: dict[str, float], train: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``summary.json`` (the calculator preset's names where they mean the same)."""
    from demo.harbor_warmup import compute_share

    args, prep, rows = result.args, result.prep, result.rows
    base, start = prep["base"], prep["rl_start"]
    return {
        "task": "harbor",
        "model": "SmolLM2-135M-Instruct",
        "control": args.control,
        "trainer_set": args.trainer_set,
        "steps": len(rows),
        "prompts_per_step": args.prompts_per_step,
        "group_size": args.group_size,
        "lr": args.lr,
        "seed": args.seed,
        "warmup_sft_steps": args.warmup_sft_steps,
        "warmup_compute_share": compute_share(args),
        "heldout_questions": prep["heldout_tasks"],
        "heldout_base": base["success"],
        "heldout_rl_start": start["success"],
        "heldout_after": after["success"],
        "heldout_gain": after["success"] - start["success"],
        "heldout_unscored": {
            "base": base["unavailable"],
            "rl_start": start["unavailable"],
            "after": after["unavailable"],
        },
        "valid_tool_calls_base": base["valid_tool_calls"],
        "valid_tool_calls_before": start["valid_tool_calls"],
        "valid_tool_calls_after": after["valid_tool_calls"],
        "mean_turns_base": base["mean_turns"],
        "mean_turns_before": start["mean_turns"],
        "mean_turns_after": after["mean_turns"],
        "drifts": train["drifts"],
        "sequences_checked": train["sequences_checked"],
        **managed_counts(result.out / "logs" / "env-harbor-0.log"),
        "training_outcomes": train["outcomes"],
        "training_unscored": unscored_training_episodes(result.out),
        "reward_per_step": [r.get("reward_mean") for r in rows],
        "rl_wall_s": round(result.loop_s, 1),
    }


def summary_text(summary: dict[str, Any], server: str, refresh: str, total_s: float) -> str:
    """The paragraph of ``summary.txt``."""
    return (
        f"SmolLM2-135M-Instruct learned shell chores on Harbor tasks: {summary['warmup_sft_steps']} "
        f"supervised warm-up steps on right episodes of the warm-up tasks, then {summary['steps']} GRPO steps "
        f"({summary['prompts_per_step']} tasks x {summary['group_size']} episodes, lr {summary['lr']}, "
        f"control {summary['control']}) through the real loop: run-api, {server} (a rank-{LORA_RANK} "
        f"LoRA hot-loaded after every step; {refresh}), the Harbor env (a shell tool through the "
        "managed server's Hermes parser, each episode in its own bubblewrap sandbox, the task's "
        f"verifier as reward), and the trainer. Greedy task success on {summary['heldout_questions']} "
        f"held-out tasks: base {summary['heldout_base']:.2f}, RL start {summary['heldout_rl_start']:.2f}, "
        f"after RL {summary['heldout_after']:.2f} (change {summary['heldout_gain']:+.2f}); episodes with "
        f"a valid tool call {summary['valid_tool_calls_before']:.2f} -> {summary['valid_tool_calls_after']:.2f}. "
        f"Token-exactness: {summary['drifts']} drift(s) in {summary['sequences_checked']} sequences. "
        f"The RL loop took {summary['rl_wall_s']:.0f} s; the whole demo {total_s:.0f} s."
    )

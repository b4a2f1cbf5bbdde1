"""The report of the arithmetic presets (tiny and SmolLM2): the reward's change over the run against
a target, greedy accuracy before and after, ``summary.txt``, ``summary.json``, and the printed lines.
Each preset supplies its wording and its final measurement (``ArithmeticReport``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from demo.preset import RunResult
from demo.report import (
    refresh_times,
    reward_change,
    server_phrase,
    step_breakdown_line,
    write_curve_and_rollouts,
)


@dataclass(frozen=True)
class ArithmeticReport:
    """How one arithmetic preset words and measures its report: the task and model as named in the
    curve's title and summary.json, the first/last window and the reward gain that counts as learning,
    the runtime's description, ``model_sentence(result, server)`` (how the model was trained, up to the
    env), ``held(result)`` (what the accuracy was measured on) and ``final_accuracy(result)``."""

    task_title: str
    model_name: str
    window: int
    target: float
    runtime: str
    model_sentence: Callable[[RunResult, str], str]
    held: Callable[[RunResult], str]
    final_accuracy: Callable[[RunResult], float]

    def __call__(self, result: RunResult) -> int:
        """The preset's report step (``Preset.report``): ``write_arithmetic_report`` in this style."""
        return write_arithmetic_report(result, self)


def write_arithmetic_report(result: RunResult, style: ArithmeticReport) -> int:
    """Measure the trained policy, write the curve, rollouts and summaries, print the figures."""
    args, rows = result.args, result.rows
    rewards = [r["reward_mean"] for r in rows if r.get("reward_mean") is not None]
    first, last, k = reward_change(rewards, style.window)
    final_acc = style.final_accuracy(result)
    title = f"GRPO on {style.task_title} (control={args.control})"
    write_curve_and_rollouts(result, title)
    where = step_breakdown_line(rows, args, result.preset.trainer_dtype)
    figures = {
        "task": args.task,
        "model": style.model_name,
        "control": args.control,
        "trainer_set": args.trainer_set,
        "steps": len(rows),
        "reward_first": first,
        "reward_last": last,
        "reward_k": k,
        "heldout_base": result.prep["warm_acc"],
        "heldout_after": final_acc,
        "rl_wall_s": round(result.loop_s, 1),
    }
    text = _summary_text(result, style, figures, where)
    (result.out / "summary.txt").write_text(text + "\n")
    (result.out / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    _print_figures(result, figures, where)
    return 0


def _summary_text(
    result: RunResult, style: ArithmeticReport, figures: dict[str, Any], where: str
) -> str:
    """The paragraph of ``summary.txt``."""
    first, last, k = figures["reward_first"], figures["reward_last"], figures["reward_k"]
    gain = last - first
    verdict = "improved" if gain >= style.target else f"did not improve by {style.target:.2f}"
    model = style.model_sentence(result, server_phrase(result.args))
    return (
        f"{model} ({style.runtime}) and the trainer as separate processes. "
        f"Control: {result.args.control}. Mean reward over the first {k} steps was {first:.3f} and "
        f"over the last {k} steps {last:.3f} (change {gain:+.3f}: {verdict}); {style.held(result)} "
        f"went from {figures['heldout_base']:.2f} to {figures['heldout_after']:.2f}. The RL loop "
        f"took {result.loop_s:.0f} s; the whole demo {result.total_s:.0f} s."
        f" Where a trainer step went: {where}."
    )


def _say(line: str) -> None:
    print(f"[demo] {line}", flush=True)


def _print_figures(result: RunResult, figures: dict[str, Any], where: str) -> None:
    first, last, k = figures["reward_first"], figures["reward_last"], figures["reward_k"]
    _say(f"reward first-{k} mean {first:.3f}  last-{k} mean {last:.3f}  change {last - first:+.3f}")
    _say(
        f"greedy accuracy {figures['heldout_base']:.2f} -> {figures['heldout_after']:.2f}; "
        f"RL loop {result.loop_s:.0f}s, total {result.total_s:.0f}s"
    )
    _say(refresh_times(result.rows))
    _say(f"step time: {where}")
    _say(f"report: {result.out}/summary.txt, reward_curve.png, metrics.jsonl, rollouts.html")

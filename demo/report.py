"""What every preset's report is made of: the metrics file, the reward curve and rollouts page, the
reward change over the run, the refresh timings, and where a trainer step went; then the run's
preset writes the rest (``Preset.report``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from demo.placement import trainer_threads
from demo.preset import RunResult
from demo.report_artefacts import plot_curve, write_rollouts


def write_report(result: RunResult) -> int:
    """``metrics.jsonl``, then the preset's own report; returns the exit code."""
    with open(result.out / "metrics.jsonl", "w") as fh:
        for r in result.rows:
            fh.write(json.dumps(r) + "\n")
    return result.preset.report(result)


def write_curve_and_rollouts(result: RunResult, title: str) -> None:
    """``reward_curve.png`` (titled ``title``) and ``rollouts.html`` (groups early and late)."""
    plot_curve(result.rows, result.out / "reward_curve.png", title=title)
    write_rollouts(result.early, result.late, result.out / "rollouts.html")


def first_last(values: list[float], k: int = 50) -> tuple[float, float]:
    first, last, _ = reward_change(values, k)
    return first, last


def reward_change(values: list[float], k: int = 50) -> tuple[float, float, int]:
    """(mean of the first k, mean of the last k, k): k shrinks to half of a shorter run, and the
    summary names the k really used (a 20-step run compares first-10 with last-10)."""
    k = max(1, min(k, len(values) // 2 or 1))
    return sum(values[:k]) / k, sum(values[-k:]) / k, k


def server_phrase(args: argparse.Namespace) -> str:
    """The inference server of this run, as the summary names it."""
    return "a real vLLM server" if args.inference == "vllm" else "the CPU inference engine"


def refresh_times(rows: list[dict[str, Any]]) -> str:
    """A one-line summary of the trainer's refresh timings (save + hand-off, and the server's load)."""
    save = [r["refresh_s"] for r in rows if r.get("refresh_s") is not None]
    push = [r["reload_push_s"] for r in rows if r.get("reload_push_s") is not None]
    if not save:
        return "no refresh timings recorded"
    text = f"refresh on the trainer's side (save + hand-off) {sum(save) / len(save):.3f} s mean"
    if push:
        text += f"; server load in the background {sum(push) / len(push):.3f} s mean"
    return text


def step_breakdown_line(rows: list[dict[str, Any]], args: argparse.Namespace, dtype: str) -> str:
    """Where the trainer's steps went (``step_timing.breakdown``, start-up step left out), against this
    machine's matmul peak measured now, at the trainer's thread count and compute ``dtype``."""
    from example_trainer.flops import matmul_peak
    from example_trainer.step_timing import breakdown, format_breakdown

    b = breakdown(rows)
    if not b:
        return format_breakdown(b)
    threads = trainer_threads(args)
    peak = matmul_peak(dtype, threads=threads, seconds=1.0)
    return format_breakdown(b, peak, f" ({dtype}, {threads} thread(s), measured after the run)")

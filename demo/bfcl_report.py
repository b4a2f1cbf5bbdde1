"""The BFCL preset's report: the held-out entries after RL (the RL starting point plus the trainer's last
adapter, served by vLLM), ``summary.json`` (BFCL non-live AST overall and per category at base, RL start
and after, with 1-SE bars and the checker's error types at each point; the training answers' outcomes;
the managed server's token-drift count), ``summary.txt``, the curve and the rollouts page."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from demo.lora import LORA_RANK
from demo.preset import RunResult
from demo.report import refresh_times, server_phrase, write_curve_and_rollouts
from demo.token_exactness import managed_counts


def write_bfcl_report(result: RunResult) -> int:
    """Measure the end of RL, write the summaries, the curve and the rollouts; returns 0."""
    summary = finish(result)
    write_curve_and_rollouts(
        result,
        f"GRPO on BFCL function calling (SmolLM2-135M-Instruct, LoRA; control={result.args.control})",
    )
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


def finish(result: RunResult) -> dict[str, Any]:
    """Measure the end of RL, write its held-out results and ``summary.json``; return the summary."""
    from atroposlib.interop.bfcl import BfclChecker
    from demo.bfcl_heldout import evaluate_heldout, summary_line, write_results

    out, prep = result.out, result.prep
    adapter = sorted((out / "trainer" / "weights").glob("step_*"))[-1]
    with BfclChecker.start() as checker:
        checker.load(sorted({e.category for e in prep["entries"]}))
        after = evaluate_heldout(
            Path(prep["warm"]), prep["entries"], checker, out / "logs" / "heldout-vllm.log", adapter
        )
    write_results(out / "heldout_after.jsonl", after)
    summary = _summary(result, after)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"[demo] held-out base:     {summary_line(prep['base'])}", flush=True)
    print(f"[demo] held-out RL start: {summary_line(prep['rl_start'])}", flush=True)
    print(f"[demo] held-out after RL: {summary_line(after)}", flush=True)
    print(
        f"[demo] token drifts: {summary['drifts']} in {summary['managed_sessions']} managed sessions; "
        f"RL loop {result.loop_s:.0f}s",
        flush=True,
    )
    return summary


def training_outcomes(out: Path) -> dict[str, int]:
    """What the env's groups file says about the training answers: valid, or BFCL's error type."""
    path = out / "groups.jsonl"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    counts: Counter[str] = Counter()
    for line in text.split("\n"):
        if not line.strip():
            continue
        for messages in json.loads(line).get("messages") or []:
            note = messages[-1].get("content", "") if messages else ""
            counts[str(note).split(": ")[0]] += 1  # "valid", or BFCL's error type
    return dict(counts)


def _points(report: Any) -> dict[str, Any]:
    from demo.bfcl_heldout import by_category, overall

    return {
        "overall": overall(report),
        "overall_se": report.aggregates()["non_live_ast"].se,
        "by_category": by_category(report),
        "by_category_se": {c: s.se for c, s in report.by_category().items()},
        "error_types": report.error_types(),
        "malformed": report.malformed(),
        "cut_at_budget": sum(r.cut for r in report.results),
    }


def _summary(result: RunResult, after: Any) -> dict[str, Any]:
    """The figures of ``summary.json``."""
    args, prep, rows = result.args, result.prep, result.rows
    points = {"base": _points(prep["base"]), "rl_start": _points(prep["rl_start"])}
    points["after"] = _points(after)
    managed = managed_counts(result.out / "logs" / "env-bfcl-0.log")
    summary: dict[str, Any] = {
        "task": "bfcl",
        "model": "SmolLM2-135M-Instruct",
        "mode": "prompt",
        "control": args.control,
        "trainer_set": args.trainer_set,
        "steps": len(rows),
        "prompts_per_step": args.prompts_per_step,
        "group_size": args.group_size,
        "lr": args.lr,
        "seed": args.seed,
        "warmup_sft_steps": args.warmup_sft_steps,
        "partial_credit": prep.get("partial_credit", 0.0),
        "part_credit": prep.get("part_credit", False),
        "strict_partial_credit": prep.get("strict_partial_credit", False),
        "format_credit": prep.get("format_credit", 0.0),
        "synthetic": prep.get("synthetic", 0),
        "synthetic_version": prep.get("synthetic_version", 0),
        "heldout_per_category": args.heldout,
        "heldout_entries": len(prep["entries"]),
        "training_pool": prep["pool"],
        "training_pool_excluded": prep["pool_excluded"],
    }
    for name, point in points.items():
        summary[f"heldout_{name}"] = point["overall"]
        summary[f"heldout_{name}_se"] = point["overall_se"]
        summary[f"heldout_{name}_by_category"] = point["by_category"]
        summary[f"heldout_{name}_by_category_se"] = point["by_category_se"]
        summary[f"heldout_{name}_error_types"] = point["error_types"]
        summary[f"heldout_{name}_malformed"] = point["malformed"]
        summary[f"heldout_{name}_cut_at_budget"] = point["cut_at_budget"]
    summary["heldout_gain"] = points["after"]["overall"] - points["rl_start"]["overall"]
    summary.update(managed)
    summary["drifts"] = managed["managed_token_drifts"]
    summary["training_outcomes"] = training_outcomes(result.out)
    summary["reward_per_step"] = [r.get("reward_mean") for r in rows]
    summary["rl_wall_s"] = round(result.loop_s, 1)
    return summary


def summary_text(summary: dict[str, Any], server: str, refresh: str, total_s: float) -> str:
    """The paragraph of ``summary.txt``."""

    def cats(name: str) -> str:
        by = summary[f"heldout_{name}_by_category"]
        return ", ".join(f"{c} {100 * v:.1f}" for c, v in by.items())

    part_note = (
        ", at least the share of accepted parts for a composed item"
        if summary.get("part_credit")
        else ""
    )
    return (
        f"SmolLM2-135M-Instruct on BFCL function calling (prompt mode): {summary['warmup_sft_steps']} "
        f"supervised warm-up steps, then {summary['steps']} GRPO steps ({summary['prompts_per_step']} "
        f"prompts x {summary['group_size']} answers, lr {summary['lr']}, control {summary['control']}) "
        f"through the real loop: run-api, {server} (a rank-{LORA_RANK} LoRA hot-loaded after every "
        f"step; {refresh}), the BFCL env (reward: the official AST checker's verdict, "
        f"{summary['partial_credit']} for a rejected list of as many calls as asked"
        f"{part_note}) and the trainer. "
        f"Held-out BFCL non-live AST ({summary['heldout_entries']} entries, "
        f"{summary['heldout_per_category']} per category, official checker), points: base "
        f"{100 * summary['heldout_base']:.1f} ({cats('base')}); RL start "
        f"{100 * summary['heldout_rl_start']:.1f} ({cats('rl_start')}); after RL "
        f"{100 * summary['heldout_after']:.1f} ({cats('after')}); change over the RL start "
        f"{100 * summary['heldout_gain']:+.1f}. Token drifts: {summary['drifts']}. The RL loop took "
        f"{summary['rl_wall_s']:.0f} s; the whole demo {total_s:.0f} s."
    )

"""The agentic task of ``trl_comparison.py``: our calculator preset against TRL GRPOTrainer's own
multi-turn tool loop (``trl_grpo_calculator.py``, in TRL's environment).

Per seed our row runs first (the preset: its warm-up, then GRPO through the managed server's Hermes tool
parser); TRL's starts from our row's merged warm-up model, on our env's questions in its draw order. Both
save their adapter after every step (ours: a resumable checkpoint, ``checkpoint_interval=1``; TRL's: a
callback), and the seconds spent saving are left out of both clocks. After a row has run, the preset's
held-out evaluator (64 greedy episodes, transformers + peft) scores its checkpoints in step order until
one reaches the held-out target: every ``HELDOUT_STRIDE``-th step, then the step before the first one
that reached it, so the step found is the first at which held-out success reached the target (unless
it reached it and fell back below between two evaluated steps). The last step is always scored.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from bench.trl_runs import REPO, Run, read_trl_rows, run_child, run_demo, schedule_of, tail
from example_trainer.metrics import read_metrics

CALCULATOR = "calculator"
CALC_MAX_TURNS = 3  # = demo.calculator_heldout.MAX_TURNS (checked in write_calc_task)
HELDOUT_TARGET = 0.8  # held-out greedy success, as the batch target
HELDOUT_STRIDE = 2  # checkpoints scored: every 2nd step, then the one before the first that reached
OURS_CHECKPOINTS = ("checkpoint_interval=1", "keep_checkpoints=1000")


def first_reaching(
    steps: int, score: Callable[[int], float], target: float, stride: int = HELDOUT_STRIDE
) -> dict[int, float]:
    """The held-out curve of a run with a checkpoint after each of its ``steps``: ``score(step)`` for
    every ``stride``-th step in order until one reaches ``target``, then for the steps between it and
    the last one scored below it (newest first, while they reach it), and for the last step; returns
    {step: score}. The first step in it whose score reaches ``target`` is the run's (see the module
    docstring for what that assumes)."""
    curve: dict[int, float] = {}
    below = 0
    for step in range(stride, steps + 1, stride):
        curve[step] = score(step)
        if curve[step] >= target:
            for back in range(step - 1, below, -1):
                curve[back] = score(back)
                if curve[back] < target:
                    break
            break
        below = step
    if steps not in curve:
        curve[steps] = score(steps)
    return dict(sorted(curve.items()))


def _missing_checkpoints(root: Path, steps: int) -> str:
    """'' when ``root`` holds a checkpoint of every step before the last, else one line saying which
    are missing (the held-out curve needs them)."""
    missing = [s for s in range(1, steps) if not (root / f"step_{s:07d}").is_dir()]
    if not missing:
        return ""
    return f"no checkpoint of step(s) {missing[:5]}{' ...' if len(missing) > 5 else ''} in {root}"


def _checkpoint_score(
    warm: Path, seed: int, adapter_of: Callable[[int], Path]
) -> Callable[[int], float]:
    """``score(step)``: the held-out greedy success of ``warm`` + the adapter of that step."""

    def score(step: int) -> float:
        success = calc_heldout_success(warm, seed, adapter_of(step), write=False)
        print(f"[bench]   held-out success after step {step}: {success:.2f}", flush=True)
        return success

    return score


def run_ours_calculator(args: argparse.Namespace, out: Path, seed: int, schedule: str) -> Run:
    """Our loop on the calculator preset, read back from its report folder: per-step batch success,
    held-out greedy success at the RL start, after every checkpoint scored and after the last step,
    token drifts, episode outcomes."""
    flags = ["--task", CALCULATOR]
    for setting in OURS_CHECKPOINTS:
        flags += ["--trainer-set", setting]
    code, mem, log, run = run_demo(args, CALCULATOR, out, seed, schedule, flags)
    summary_path = out / "summary.json"
    if code != 0 or not summary_path.exists():
        run.error = f"our loop failed (exit {code}); see {log}:\n{tail(log)}"
        return run
    rows = [r for r in read_metrics(out / "metrics.jsonl") if r.get("time_step_s") is not None]
    summary = json.loads(summary_path.read_text())
    start = rows[0]["time"] - rows[0]["time_step_s"]
    saving = 0.0  # the checkpoints' seconds before each row: left out, as TRL's saves are
    run.ends = []
    for r in rows:
        saving += float(r.get("time_checkpoint_s") or 0.0)
        run.ends.append(float(r["time"]) - start - saving)
    run.rewards = [float(r.get("reward_mean") or 0.0) for r in rows]
    run.step_s = [float(r["time_step_s"]) for r in rows]
    run.acc_before, run.acc_after = summary["heldout_rl_start"], summary["heldout_after"]
    run.drifts = int(summary["drifts"])
    run.outcomes = {k: int(v) for k, v in (summary.get("training_outcomes") or {}).items()}
    run.peak_mib = mem.peak(start, float(rows[-1]["time"]))
    checkpoints = out / "trainer" / "checkpoints"
    run.error = _missing_checkpoints(checkpoints, len(rows))
    if run.error:
        return run
    score = _checkpoint_score(
        out / "model" / "warm", seed, lambda step: checkpoints / f"step_{step:07d}"
    )
    last, final = len(rows), float(summary["heldout_after"])
    run.heldout = first_reaching(
        last, lambda step: final if step == last else score(step), HELDOUT_TARGET
    )
    return run


def write_calc_task(args: argparse.Namespace, seed: int, model: Path, path: Path) -> None:
    """TRL's ``TASK.json`` (``trl_grpo_calculator.py``): our env's system prompt, its training
    questions in its draw order (``Random(seed + 1)`` over the seed's split), the turn limit, the
    sequence budget and the first prompt's token ids as our env renders them."""
    import random

    from transformers import AutoTokenizer

    from atroposlib.envkit.calculator_task import split_problems
    from demo.calculator_heldout import HELD_OUT as CALC_HELD_OUT
    from demo.calculator_heldout import MAX_TURNS, SEQ_LEN, system_prompt

    assert MAX_TURNS == CALC_MAX_TURNS, "CALC_MAX_TURNS must follow the preset"
    split = split_problems(CALC_HELD_OUT, seed)
    rng = random.Random(seed + 1)
    problems = [split.train_problem(rng) for _ in range(args.steps * 4)]
    system = system_prompt()
    first = [
        {"role": "system", "content": system},
        {"role": "user", "content": problems[0].question},
    ]
    tok = AutoTokenizer.from_pretrained(str(model))
    ids = tok.apply_chat_template(first, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    task = {
        "system": system,
        "questions": [p.question for p in problems],
        "a": [p.a for p in problems],
        "b": [p.b for p in problems],
        "max_turns": MAX_TURNS,
        "max_token_length": SEQ_LEN,
        "first_prompt_ids": [int(i) for i in ids],
    }
    path.write_text(json.dumps(task))


def run_trl_calculator(
    args: argparse.Namespace, out: Path, seed: int, trl_python: str, start: Run, warm: Path
) -> Run:
    """GRPOTrainer with ``tools=`` on the calculator task from our row's warm-up (``warm``), the
    held-out episodes played by our evaluator with its adapters (after every step scored, as ours)."""
    from demo.lora import LORA_RANK, TRAINER_DTYPE

    out.mkdir(parents=True, exist_ok=True)
    write_calc_task(args, seed, warm, out / "task.json")
    argv = [trl_python, str(REPO / "bench" / "trl_grpo_calculator.py"), "--model", str(warm)]
    argv += ["--task", str(out / "task.json"), "--out", str(out), "--steps", str(args.steps)]
    argv += ["--seed", str(seed), "--lora-rank", str(LORA_RANK), "--threads", str(args.threads)]
    argv += ["--dtype", TRAINER_DTYPE, "--temperature", "1.0", "--save-every", "1"]
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE="1", HF_HUB_OFFLINE="1")
    env.update(TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    log = out / "trl.log"
    code, mem, wall = run_child(argv, log, env)
    run = Run("trl", CALCULATOR, seed, wall_s=wall)
    result_path = out / "result.json"
    if code != 0 or not result_path.exists():
        said = [x for x in tail(log, 3).splitlines() if x.startswith("trl_grpo_calculator: ")]
        why = said[-1] if said else f"trl failed (exit {code})"  # e.g. no multi-turn tools
        run.error = f"{why}; see {log}:\n{tail(log)}"
        return run
    result = json.loads(result_path.read_text())
    read_trl_rows(run, result, mem)
    run.outcomes = {k: int(v) for k, v in result.get("outcomes", {}).items()}
    run.acc_before = start.acc_before
    run.acc_after = final = calc_heldout_success(warm, seed, out / "adapter")
    adapters = out / "adapters"
    run.error = _missing_checkpoints(adapters, len(run.rewards))
    if run.error:
        return run
    score = _checkpoint_score(warm, seed, lambda step: adapters / f"step_{step:07d}")
    last = len(run.rewards)
    run.heldout = first_reaching(
        last, lambda step: final if step == last else score(step), HELDOUT_TARGET
    )
    return run


def calc_heldout_success(warm: Path, seed: int, adapter: Path, write: bool = True) -> float:
    """The held-out greedy success of ``warm`` + ``adapter`` (the preset's evaluator); ``write``: its
    episodes to ``heldout_after.jsonl`` beside the adapter."""
    from atroposlib.envkit.calculator_task import split_problems
    from demo.calculator_heldout import HELD_OUT as CALC_HELD_OUT
    from demo.calculator_heldout import play_heldout, write_episodes
    from demo.tool_episodes import summarize

    episodes = play_heldout(warm, split_problems(CALC_HELD_OUT, seed), adapter)
    if write:
        write_episodes(adapter.parent / "heldout_after.jsonl", episodes)
    return summarize(episodes)["success"]


def run_calculator_task(
    args: argparse.Namespace, seeds: list[int], rows: list[str], trl_python: Optional[str]
) -> tuple[dict[int, float], list[Run]]:
    """The calculator task's runs: per seed and repeat, our rows first (the first one's warm-up is
    where TRL's row starts from), then TRL's; (the RL start's held-out success per seed, the runs)."""
    ours_rows = [r for r in rows if r.startswith("ours")]
    theirs = [r for r in rows if r == "trl"]
    base: dict[int, float] = {}
    runs: list[Run] = []
    for seed in seeds:
        for rep in range(args.repeats):
            first: Optional[tuple[Run, Path]] = None
            for row in ours_rows + theirs:
                out = args.out / CALCULATOR / f"{row}-s{seed}-{rep}"
                print(f"[bench] {CALCULATOR} {row} seed {seed} run {rep + 1} ...", flush=True)
                if row == "trl":
                    if first is None or first[0].error:
                        print("[bench]   skipped: our row, whose warm-up it starts from, failed")
                        continue
                    assert trl_python is not None
                    run = run_trl_calculator(args, out, seed, trl_python, *first)
                else:
                    schedule = schedule_of(row)
                    run = run_ours_calculator(args, out, seed, schedule)
                    if first is None:
                        first = (run, out / "model" / "warm")
                        if run.acc_before is not None:
                            base[seed] = run.acc_before
                print(run.report(), flush=True)
                runs.append(run)
    return base, runs

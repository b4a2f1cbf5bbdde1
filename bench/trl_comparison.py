"""Our loop against what a user would pick instead: TRL's GRPOTrainer, on one machine, same model and task.

Runs, alternately on the same machine and for each task, our loop (``atropos-demo --model smollm2``:
run-api, the real vLLM CPU build with the trainer's LoRA hot-loaded after every step, the chat-arithmetic
env, the GRPO trainer) and TRL's ``GRPOTrainer`` (transformers generation in one process, the newest TRL
that installs here, in its own environment: ``scripts/setup_trl_bench.sh``), and, with ``--rows`` naming
it, TRL's experimental ``AsyncGRPOTrainer`` against the same vLLM server build. That row needs CUDA: the
async trainer trains on packed rows (a group's prompt once, as ours does) through flash-attention's
varlen kernel, which it fetches from the Hub (``kernels-community/flash-attn3``); on a CPU the bench
says so and leaves it out. Tried here: with four CPU shims in ``trl_grpo_chat.py`` (see there) it
started, generated through vLLM and failed at its first training forward on that kernel. Our rows are the demo's
schedules (``--schedule``): ``ours`` = overlap (the env samples the next batch while the trainer trains:
up to one step of policy lag), ``ours-split`` (the same on disjoint cores), ``ours-turns`` (on-policy:
generation and training alternate, each with every core). Prints one table per task:

* seconds per step (median of steps 2..N; the first one includes start-up work) and the mean;
* wall time from the training loop's start to the reward target: the first step at which the mean batch
  reward of the last ``--window`` steps reaches ``--target`` (and that step);
* held-out greedy accuracy before and after ``--steps`` steps (30 operand pairs never trained on,
  evaluated by the same code for every row: ``demo/chat_eval.py``, transformers + peft);
* peak memory: the largest sum of PSS over the run's processes during its training loop (ours: run-api,
  vLLM and its engine process, the env, the trainer; TRL: its one process, and the async trainer's
  vLLM server and rollout worker);
* then, per row, the medians over its runs (seconds per step; time to target over the runs that reached
  it, and how many did), and TRL's figures over ours seed by seed: the runs of one seed see the same
  questions in the same order (below), which is most of what moves a 20-step reward curve.

Tasks: ``single`` (``What is a + b?``, a, b in 1..9: the SmolLM2 demo's task) and ``two-digit`` (a, b in
10..30: harder sums the policy does not saturate as fast; the base model is measured first, its held-out
greedy accuracy heads the table: 0.27 against 0.33 for ``single``. Operands 10..99 were measured too and
left out: greedy accuracy 0.00, every reply starts explaining and runs out of its 16 tokens).
``calculator`` is the agentic task (``What is a * b?`` with a ``calculator`` tool, up to 3 assistant
turns: the calculator preset): our row runs the preset (its warm-up, then GRPO through the managed
server's Hermes tool parser), TRL's runs GRPOTrainer's own multi-turn tool loop (``tools=``,
``trl_grpo_calculator.py``: its docstring lists what matches and what does not) from our row's merged
warm-up model, on our env's questions in its order; the targets are a batch success of 0.8 and a held-out
success of 0.8: both rows save their adapter after every step, and the preset's held-out evaluator (64
greedy episodes) scores the checkpoints after the row has run, every second step until one reaches 0.8,
then the step before it (``trl_calculator.py``), so the table gives the first step whose held-out success
reached 0.8 and the training seconds to it (saving left out on both sides). A TRL without multi-turn
tool support is said in one line and our row still runs.

Settings and how they map (TRL name = ours):

====================================  ===========================================================
completions per step                  ``per_device_train_batch_size=32`` (gradient accumulation 1,
                                      ``steps_per_generation=1``) = ``--batch-size 32`` (4 prompts x 8)
group size                            ``num_generations=8`` = ``--env.group_size 8``
reply budget, sampling                ``max_completion_length=16, temperature=0.7, top_p=1, top_k=0``
                                      = the env's ``max_completion_tokens 16``, ``temperature 0.7``
LoRA                                  r 16, alpha 32, dropout 0, on q,k,v,o,gate,up,down (both)
learning rate and schedule            ``learning_rate=5e-4, lr_scheduler_type="constant", warmup 0``
                                      = ``--lr 5e-4`` (constant, ``--warmup-steps 0``)
optimizer                             AdamW, betas (0.9, 0.99), weight decay 0, grad-norm clip 1.0
loss aggregation                      ``loss_type="dapo"`` (token mean over the whole batch) =
                                      ``--aggregation token``
clipping                              ``epsilon=0.2, epsilon_high=0.28`` = ``--eps-low 0.2 --eps-high 0.28``,
                                      both against the policy the step starts from (TRL: its own
                                      log-probabilities, ``num_iterations=1``; ours:
                                      ``clip_reference=proximal``), so neither clip binds
temperature                           both divide the logits by 0.7 (TRL always; ours from each group's
                                      ``generation_params``, with vLLM reporting the sampled
                                      distribution's log-probabilities: ``--logprobs-mode
                                      processed_logprobs``)
KL                                    none: ``beta=0`` = ``--kl-coef 0``
advantages                            ``scale_rewards="group"``: (r - group mean) / (group std + 1e-4)
                                      = (r - mean) / std
precision                             ``bf16`` = ``--dtype`` of the SmolLM2 preset (both the same)
threads                               TRL's process ``torch.set_num_threads(--threads)``; ours: the
                                      preset's (trainer ``--threads``; vLLM binds its own)
====================================  ===========================================================

What cannot be matched, and is therefore part of what is compared:

* **Who generates.** TRL generates with ``model.generate`` in its training process, between steps;
  ours generates in a vLLM server while the trainer trains (the env keeps one batch ahead:
  ``max_batches_offpolicy 1``), so our samples can come from the policy one step behind, corrected by
  an importance weight min(pi / mu, 2) against vLLM's log-probabilities (fp32 there, bf16 autocast in
  the trainer); TRL's samples are on-policy (weight 1).
* **What the forward computes.** Our trainer runs each group's prompt once (prefix sharing, same
  log-probabilities); TRL's runs it once per completion.
* **Standard deviation.** TRL's group std is the unbiased one (n - 1) plus 1e-4; ours the population
  std, and a group with all-equal rewards gets advantage 0 in both.
* **Prompts.** The same sequence: TRL's dataset is the env's draws (``Random(seed + 1)`` over the
  seed's training pairs) in order (``shuffle_dataset=False``), 4 a step; our env draws them in that
  order as it goes (with 4 groups in flight, a group can land in the next batch).
* **Truncation.** Neither masks truncated replies (a reply cut off before the sum scores 0 in both).

Runs: every row once per seed of ``--seeds`` (and ``--repeats`` times), alternating (ours, TRL, [async],
ours, ...), so both see the same machine load over time; the table gives each run. When TRL cannot be
installed the table says so in one line and still has our row.

A benchmark, not a test: with the defaults (2 tasks x 2 rows x 40 steps, seed 0) it takes about 30
minutes on 2 quiet cores (TRL's rows are two thirds of it), ``--tasks single --steps 20 --seeds 0,1,2``
about 25, and it needs the machine to itself for its timings::

    python bench/trl_comparison.py [--steps 40] [--tasks single,two-digit,calculator] [--rows ours-split,trl]
        [--seeds 0,1,2] [--repeats 1] [--target 0.9] [--window 5] [--out runs/bench-trl]
        [--trainer-set FIELD=VALUE ...]

``--trainer-set`` gives our rows an extra trainer setting (``atropos-demo --trainer-set``); the row
measured with the LoRA loaded in the background was ``--rows ours-split --trainer-set
async_lora_load=true``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.trl_calculator import (  # noqa: E402
    CALC_MAX_TURNS,
    CALCULATOR,
    HELDOUT_TARGET,
    run_calculator_task,
)
from bench.trl_runs import REPO, Run, read_trl_rows, run_child, run_demo, schedule_of, tail  # noqa: E402
from demo.trainer_set import trainer_overrides  # noqa: E402
from example_trainer.metrics import read_metrics  # noqa: E402

TRL_VERSION = "1.16.0"  # keep equal to VERSION in scripts/setup_trl_bench.sh
# two-digit: operands 10..30 (held-out greedy accuracy of the base model 0.27); with 10..99 it is 0.00
# (every greedy reply starts "To add 25 and 60, we need to..." and runs out of its 16 tokens), no signal
TASKS = {"single": (1, 9), "two-digit": (10, 30)}
# the agentic task (multi-turn tool use, the calculator preset: trl_calculator.py), target on the batch
# success and on the held-out success of its checkpoints
ALL_TASKS = (*TASKS, CALCULATOR)
TARGETS = {"single": 0.9, "two-digit": 0.9, CALCULATOR: 0.8}
# ours = the demo's --schedule overlap; ours-split / ours-turns its other schedules
ROWS = ("ours", "ours-split", "ours-turns", "trl", "trl-async")
HELD_OUT = 30


# ----------------------------------------------------------------------------------------------
# The rows
# ----------------------------------------------------------------------------------------------
def run_ours(
    args: argparse.Namespace, task: str, out: Path, seed: int, schedule: str = "overlap"
) -> Run:
    """Our loop: the SmolLM2 demo preset with ``--schedule`` (overlap, split or turns), its report
    folder read back."""
    lo, hi = TASKS[task]
    code, mem, log, run = run_demo(
        args, task, out, seed, schedule, ["--operands", str(lo), str(hi)]
    )
    if code != 0:
        run.error = f"our loop failed (exit {code}); see {log}:\n{tail(log)}"
        return run
    rows = [r for r in read_metrics(out / "metrics.jsonl") if r.get("time_step_s") is not None]
    if not rows:
        run.error = f"our loop left no metrics rows in {out}"
        return run
    start = rows[0]["time"] - rows[0]["time_step_s"]
    run.rewards = [float(r.get("reward_mean") or 0.0) for r in rows]
    run.step_s = [float(r["time_step_s"]) for r in rows]
    run.ends = [float(r["time"]) - start for r in rows]
    held = [json.loads(line) for line in (out / "heldout.jsonl").read_text().split("\n") if line]
    run.acc_before = sum(h["base_correct"] for h in held) / len(held)
    run.acc_after = sum(h["trained_correct"] for h in held) / len(held)
    run.peak_mib = mem.peak(start, float(rows[-1]["time"]))
    return run


def run_trl(
    args: argparse.Namespace,
    task: str,
    out: Path,
    seed: int,
    trl_python: str,
    kind: str,
    model: Path,
) -> Run:
    """TRL's GRPOTrainer (``kind`` sync) or AsyncGRPOTrainer (async, with its own vLLM server)."""
    lo, hi = TASKS[task]
    from demo.lora import LORA_RANK, TRAINER_DTYPE
    from demo.presets.smollm2_arithmetic import MAX_REPLY_TOKENS

    out.mkdir(parents=True, exist_ok=True)
    argv = [trl_python, str(REPO / "bench" / "trl_grpo_chat.py"), "--model", str(model)]
    argv += ["--out", str(out), "--trainer", kind, "--steps", str(args.steps)]
    argv += ["--seed", str(seed), "--operands", str(lo), str(hi)]
    argv += ["--held-out", str(HELD_OUT), "--max-tokens", str(MAX_REPLY_TOKENS)]
    argv += ["--lora-rank", str(LORA_RANK), "--threads", str(args.threads)]
    argv += ["--dtype", TRAINER_DTYPE]
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE="1", HF_HUB_OFFLINE="1")
    env.update(TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)  # TRL's environment only
    label = "trl" if kind == "sync" else "trl-async"
    server = None
    log = out / "trl.log"
    try:
        if kind == "async":
            server, url = _start_vllm_for_async(model, out)
            argv += ["--vllm-url", url]
        code, mem, wall = run_child(argv, log, env)
    finally:
        if server is not None:
            _stop(server)
    run = Run(label, task, seed, wall_s=wall)
    result_path = out / "result.json"
    if code != 0 or not result_path.exists():
        run.error = f"{label} failed (exit {code}); see {log}:\n{tail(log)}"
        return run
    read_trl_rows(run, json.loads(result_path.read_text()), mem)
    run.acc_after = _heldout_accuracy(model, task, seed, out / "adapter")
    return run


def _start_vllm_for_async(model: Path, out: Path) -> tuple[subprocess.Popen, str]:
    """A vLLM server (the CPU build) with runtime LoRA, the way TRL's async trainer wants it."""
    from atroposlib.inference.vllm_launch import vllm_server
    from atroposlib.utils.net import free_port, wait_for_http
    from demo.lora import LORA_RANK

    port = free_port()
    # TRL loads each policy version as a new adapter before it unloads the oldest: with max_staleness
    # 1, requests may name two versions while a third loads (it refuses a server with fewer slots)
    server = vllm_server(
        str(model),
        port,
        max_model_len=256,
        dev_mode=True,
        lora_rank=LORA_RANK,
        extra_args=("--max-loras", "3"),
    )
    env = server.full_env()
    env["VLLM_CACHE_ROOT"] = str(out / "vllm-cache")
    log = open(out / "vllm.log", "w")
    proc = subprocess.Popen(
        server.argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/health", timeout=600, proc=proc)
    except BaseException:
        _stop(proc)
        raise
    return proc, url


def _stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _heldout_accuracy(model: Path, task: str, seed: int, adapter: Optional[Path]) -> float:
    from atroposlib.utils.chat_arithmetic_task import split_problems
    from demo.chat_eval import chat_greedy_accuracy
    from demo.presets.smollm2_arithmetic import MAX_REPLY_TOKENS

    _, held = split_problems(*TASKS[task], HELD_OUT, seed)
    acc, _ = chat_greedy_accuracy(model, held, MAX_REPLY_TOKENS, adapter)
    return acc


# ----------------------------------------------------------------------------------------------
# Set-up: the model, TRL's environment
# ----------------------------------------------------------------------------------------------
def find_trl_python() -> tuple[Optional[str], str]:
    """TRL's Python (installed once by scripts/setup_trl_bench.sh), or None and why not."""
    own = os.environ.get("ATROPOS_TRL_BENCH_PYTHON")
    if own:
        return own, ""
    if os.environ.get("ATROPOS_SKIP_TRL") == "1":
        return None, "ATROPOS_SKIP_TRL=1"
    venv = Path(
        os.environ.get("ATROPOS_TRL_BENCH_VENV")
        or Path.home() / ".cache" / "atroposlib" / f"trl-bench-{TRL_VERSION}"
    )
    ok = venv / ".atroposlib-trl-bench-ok-2"  # scripts/setup_trl_bench.sh
    if not ok.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "setup_trl_bench.sh")], check=False)
    if ok.exists():
        return str(venv / "bin" / "python"), ""
    failed = venv / "install-failed.txt"
    reason = failed.read_text().strip() if failed.exists() else "scripts/setup_trl_bench.sh failed"
    return None, reason


def prepare_model() -> Path:
    from demo.smollm2 import MODEL_CACHE, smollm2_missing

    missing = smollm2_missing()
    if missing:
        raise SystemExit(f"trl_comparison: {missing}")
    if not (MODEL_CACHE / "config.json").is_file():
        from atroposlib.inference.smollm2 import import_smollm2

        import_smollm2(MODEL_CACHE)
    return MODEL_CACHE


# ----------------------------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------------------------
def _f(v: Optional[float], fmt: str, none: str = "-") -> str:
    return none if v is None else format(v, fmt)


def task_target(args: argparse.Namespace, task: str) -> float:
    """The reward target of ``task``: ``--target``, or the task's own (``TARGETS``)."""
    return TARGETS[task] if args.target is None else args.target


def task_title(task: str, args: argparse.Namespace, base: dict[int, float]) -> str:
    """The table's first line: the task, the schedule, the target and where the policy starts."""
    bases = ", ".join(f"seed {k}: {v:.2f}" for k, v in sorted(base.items()))
    shape = f"SmolLM2-135M-Instruct, LoRA r16, {args.steps} steps of 4 prompts x 8"
    target = f"mean reward of {args.window} steps >= {task_target(args, task)}"
    if task == CALCULATOR:
        return (
            f"\n{task}: 'What is a * b?' with a calculator tool, up to {CALC_MAX_TURNS} turns; {shape} "
            f"episodes, after our preset's warm-up (both rows start from its merged model); target: "
            f"{target} (batch success); RL start: held-out greedy success {bases}"
        )
    lo, hi = TASKS[task]
    return (
        f"\n{task}: 'What is a + b?', a, b in {lo}..{hi}; {shape}; target: {target}; base model: "
        f"held-out greedy accuracy {bases}"
    )


def table(task: str, runs: list[Run], args: argparse.Namespace, base: dict[int, float]) -> str:
    target = task_target(args, task)
    lines = [
        task_title(task, args, base),
        f"{'row':<15} {'seed':>4} {'s/step med':>10} {'mean':>6} {'to target':>15} "
        f"{'reward mean':>11} {'last 5':>6} {'held-out greedy':>15} {'peak MiB':>9} {'wall':>7}",
    ]
    for r in runs:
        if r.error:
            lines.append(f"{r.row:<15} {r.seed:>4} FAILED: {r.error.splitlines()[0]}")
            continue
        step, secs = r.to_target(target, args.window)
        to = f"{secs:.0f} s @ step {step}" if step else "not reached"
        before = base.get(r.seed) if r.acc_before is None else r.acc_before
        acc = f"{_f(before, '.2f')} -> {_f(r.acc_after, '.2f')}"
        k = min(5, len(r.rewards))
        mean_reward = sum(r.rewards) / len(r.rewards) if r.rewards else None
        last = sum(r.rewards[-k:]) / k if k else None
        mean = sum(r.step_s) / len(r.step_s) if r.step_s else None
        lines.append(
            f"{r.row:<15} {r.seed:>4} {_f(r.median_step(), '.1f'):>10} {_f(mean, '.1f'):>6} "
            f"{to:>15} {_f(mean_reward, '.3f'):>11} {_f(last, '.2f'):>6} {acc:>15} "
            f"{_f(r.peak_mib, '.0f'):>9} {r.wall_s / 60:>6.1f}m"
            + (f" drifts {r.drifts}" if r.drifts is not None else "")
            + (f" outcomes {json.dumps(r.outcomes, sort_keys=True)}" if r.outcomes else "")
        )
        if r.heldout:
            h_step, h_secs = r.heldout_to_target(HELDOUT_TARGET)
            reached = f"{h_secs:.0f} s @ step {h_step}" if h_step else "not reached"
            curve = " ".join(f"{k}:{v:.2f}" for k, v in sorted(r.heldout.items()))
            lines.append(f"{'':<15} held-out success >= {HELDOUT_TARGET}: {reached} ({curve})")
    lines.extend(_summary(runs, args, target))
    return "\n".join(lines)


def _summary(runs: list[Run], args: argparse.Namespace, target: float) -> list[str]:
    """Per row over its runs: the median seconds per step and time to target (over the runs that
    reached it, with how many did), the mean held-out accuracy after; then each row's figures over
    ``ours``-rows' (> 1: the other row is slower), seed by seed where both ran it."""
    done = [r for r in runs if not r.error]
    labels = list(dict.fromkeys(r.row for r in done))
    out = []
    for label in labels:
        mine = [r for r in done if r.row == label]
        steps = [x for r in mine if (x := r.median_step()) is not None]
        reach = [t for r in mine if (t := r.to_target(target, args.window)[1]) is not None]
        after = [r.acc_after for r in mine if r.acc_after is not None]
        text = f"{label}: {len(mine)} run(s), s/step median {_f(statistics.median(steps) if steps else None, '.1f')}"
        text += f", target reached in {len(reach)}/{len(mine)}"
        if reach:
            text += f" (median {statistics.median(reach):.0f} s)"
        if after:
            text += f", held-out after {sum(after) / len(after):.2f} (mean)"
        scored = [r.heldout_to_target(HELDOUT_TARGET) for r in mine if r.heldout]
        held = [(n, t) for n, t in scored if n is not None and t is not None]
        if scored:
            text += f", held-out target reached in {len(held)}/{len(scored)}"
        if held:
            text += (
                f" (median {statistics.median(t for _, t in held):.0f} s, "
                f"step {statistics.median(n for n, _ in held):g})"
            )
        out.append(text)
    for ours in [x for x in labels if x.startswith("ours")]:
        for theirs in [x for x in labels if x.startswith("trl")]:
            pairs = []
            for seed in sorted({r.seed for r in done}):
                a = [r for r in done if r.row == ours and r.seed == seed]
                b = [r for r in done if r.row == theirs and r.seed == seed]
                if not a or not b:
                    continue
                sa, sb = a[0].median_step(), b[0].median_step()
                na, ta = a[0].to_target(target, args.window)
                nb, tb = b[0].to_target(target, args.window)
                step_ratio = f"s/step x{sb / sa:.2f}" if sa and sb else "s/step -"
                if ta is not None and tb is not None:
                    reached = f"to target x{tb / ta:.2f} in time, steps {nb} vs {na}"
                else:
                    reached = f"to target: {ours} {_f(ta, '.0f')} s, {theirs} {_f(tb, '.0f')} s"
                if a[0].heldout and b[0].heldout:
                    ha, hta = a[0].heldout_to_target(HELDOUT_TARGET)
                    hb, htb = b[0].heldout_to_target(HELDOUT_TARGET)
                    if hta is not None and htb is not None:
                        reached += (
                            f"; to held-out target x{htb / hta:.2f} in time, steps {hb} vs {ha}"
                        )
                    else:
                        reached += f"; to held-out target: {ours} {_f(hta, '.0f')} s, {theirs} {_f(htb, '.0f')} s"
                pairs.append(f"seed {seed}: {step_ratio}, {reached}")
            if pairs:
                out.append(f"{theirs} / {ours} (> 1: {ours} faster): " + "; ".join(pairs))
    return out


# ----------------------------------------------------------------------------------------------
# The command line, what can run here, the runs
# ----------------------------------------------------------------------------------------------
def parse_args() -> tuple[argparse.Namespace, list[int], list[str], list[str]]:
    """(the flags, the seeds, the tasks, the rows), checked here, not after a TRL row has run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--tasks", default="single,two-digit", help=f"of {', '.join(ALL_TASKS)}")
    p.add_argument("--rows", default="ours-split,trl", help=f"of {', '.join(ROWS)}")
    p.add_argument(
        "--seeds",
        default="0",
        help="comma-separated seeds (each: the question order and held-out split, the same for "
        "every row, and the trainers' seeds); every row runs once per seed",
    )
    p.add_argument("--repeats", type=int, default=1, help="runs of every row per seed")
    p.add_argument(
        "--target",
        type=float,
        default=None,
        help="the reward target (default: 0.9 for the arithmetic tasks, 0.8 for calculator)",
    )
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="TRL's torch threads")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-trl")
    p.add_argument(
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an extra setting of our trainer, for our rows (atropos-demo --trainer-set), e.g. "
        "clip_reference=behaviour",
    )
    args = p.parse_args()
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError as e:
        p.error(f"--trainer-set or --seeds: {e}")
    tasks = [t for t in args.tasks.split(",") if t]
    rows = [r for r in args.rows.split(",") if r]
    bad = [t for t in tasks if t not in ALL_TASKS] + [r for r in rows if r not in ROWS]
    if CALCULATOR in tasks and not any(r.startswith("ours") for r in rows):
        p.error(f"--tasks {CALCULATOR} needs one of our rows: TRL's starts from its warm-up")
    if CALCULATOR in tasks and "trl-async" in rows:
        p.error(f"--tasks {CALCULATOR}: trl-async has no tool loop here; use --rows ours-split,trl")
    if bad or not seeds or args.steps < args.window or args.repeats < 1 or args.window < 1:
        p.error(
            f"unknown task/row {bad}"
            if bad
            else "--steps must be >= --window >= 1, --repeats >= 1, and --seeds name one or more"
        )
    return args, seeds, tasks, rows


def runnable_rows(rows: list[str]) -> tuple[list[str], Optional[str], str]:
    """(the rows this machine can run, TRL's Python or None, why TRL's rows are left out or ''),
    each row left out said in one line."""
    trl_python, why = (None, "")
    if any(r.startswith("trl") for r in rows):
        trl_python, why = find_trl_python()
        if trl_python is None:
            print(
                f"trl_comparison: TRL {TRL_VERSION} cannot be installed here ({why}); our row only"
            )
            rows = [r for r in rows if not r.startswith("trl")]
    if "trl-async" in rows:
        from atroposlib.inference.vllm_launch import cuda_available

        if not cuda_available():
            why_async = (
                "TRL 1.16's AsyncGRPOTrainer trains on packed rows with flash-attention's varlen "
                "kernel (kernels-community/flash-attn3, fetched from the Hub): CUDA only"
            )
            print(f"trl_comparison: trl-async cannot run here ({why_async}); left out")
            rows = [r for r in rows if r != "trl-async"]
    if any(r.startswith("ours") for r in rows):
        from demo.servers import vllm_missing

        missing = vllm_missing()
        if missing:
            print(f"trl_comparison: our rows need vLLM ({missing}); TRL's rows only")
            rows = [r for r in rows if not r.startswith("ours")]
    return rows, trl_python, why


def run_row(
    args: argparse.Namespace,
    task: str,
    row: str,
    seed: int,
    out: Path,
    trl_python: Optional[str],
    model: Path,
) -> Run:
    """One run of ``row``: ours with its schedule, or TRL's sync or async trainer."""
    if row.startswith("ours"):
        schedule = schedule_of(row)
        return run_ours(args, task, out, seed, schedule)
    assert trl_python is not None
    kind = "sync" if row == "trl" else "async"
    return run_trl(args, task, out, seed, trl_python, kind, model)


def run_task(
    args: argparse.Namespace,
    task: str,
    seeds: list[int],
    rows: list[str],
    trl_python: Optional[str],
    model: Path,
) -> tuple[dict[int, float], list[Run]]:
    """(the base model's held-out accuracy per seed, every run of every row) for ``task``: per
    seed and repeat, the rows one after the other."""
    if task == CALCULATOR:
        return run_calculator_task(args, seeds, rows, trl_python)
    base = {seed: _heldout_accuracy(model, task, seed, None) for seed in seeds}
    for seed, acc in base.items():
        print(
            f"[bench] {task} seed {seed}: base model held-out greedy accuracy {acc:.2f}",
            flush=True,
        )
    runs: list[Run] = []
    for seed in seeds:
        for rep in range(args.repeats):
            for row in rows:
                out = args.out / task / f"{row}-s{seed}-{rep}"
                print(
                    f"[bench] {task} {row} seed {seed} run {rep + 1}/{args.repeats} ...",
                    flush=True,
                )
                run = run_row(args, task, row, seed, out, trl_python, model)
                print(run.report(), flush=True)
                runs.append(run)
    return base, runs


def main() -> int:
    args, seeds, tasks, rows = parse_args()
    model = prepare_model()
    rows, trl_python, why = runnable_rows(rows)
    if not rows:
        raise SystemExit("trl_comparison: nothing can run here")
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "tasks": {}}
    texts = []
    every_run: list[Run] = []
    for task in tasks:
        base, runs = run_task(args, task, seeds, rows, trl_python, model)
        text = table(task, runs, args, base)
        print(text, flush=True)
        texts.append(text)
        report["tasks"][task] = {"base": base, "runs": [vars(r) for r in runs]}
        every_run += runs
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.txt").write_text("\n".join(texts) + "\n")
    (args.out / "result.json").write_text(json.dumps(report, indent=1, default=str))
    if why:
        print(f"(TRL rows left out: {why})")
    failed = [r for r in every_run if r.error]
    if failed:
        first = failed[0]
        print(
            f"trl_comparison: {len(failed)} of {len(every_run)} runs failed (first: {first.row} "
            f"seed {first.seed}: {first.error.splitlines()[0]})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

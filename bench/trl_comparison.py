"""Our loop against what a user would pick instead: TRL's GRPOTrainer, on one machine, same model and task.

Runs, alternately on the same machine and for each task, our loop (``atropos-demo --model smollm2``:
run-api, the real vLLM CPU build with the trainer's LoRA hot-loaded after every step, the chat-arithmetic
env, the GRPO trainer) and TRL's ``GRPOTrainer`` (transformers generation in one process, the newest TRL
that installs here, in its own environment: ``scripts/setup_trl_bench.sh``), and, with ``--rows`` naming
it, TRL's experimental ``AsyncGRPOTrainer`` against the same vLLM server build. Our rows are the demo's
schedules (``--schedule``): ``ours`` = overlap (the env samples the next batch while the trainer trains:
up to one step of policy lag), ``ours-split`` (the same on disjoint cores), ``ours-turns`` (on-policy:
generation and training alternate, each with every core). Prints one table per task:

* seconds per step (median of steps 2..N; the first one includes start-up work) and the mean;
* wall time from the training loop's start to the reward target: the first step at which the mean batch
  reward of the last ``--window`` steps reaches ``--target`` (and that step);
* held-out greedy accuracy before and after ``--steps`` steps (30 operand pairs never trained on,
  evaluated by the same code for every row: ``example_trainer/chat_eval.py``, transformers + peft);
* peak memory: the largest sum of PSS over the run's processes during its training loop (ours: run-api,
  vLLM and its engine process, the env, the trainer; TRL: its one process, and the async trainer's
  vLLM server and rollout worker);
* and TRL's figure over ours for the first two.

Tasks: ``single`` (``What is a + b?``, a, b in 1..9: the SmolLM2 demo's task) and ``two-digit`` (a, b in
10..30: harder sums the policy does not saturate as fast; the base model is measured first, its held-out
greedy accuracy heads the table: 0.27 against 0.33 for ``single``. Operands 10..99 were measured too and
left out: greedy accuracy 0.00, every reply starts explaining and runs out of its 16 tokens).

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
clipping                              ``epsilon=0.2, epsilon_high=0.28`` = ``--eps-low 0.2 --eps-high 0.28``
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
  the importance ratio against vLLM's logprobs (clipped, TIS cap 2); TRL's ratio is 1 (on-policy,
  ``num_iterations=1``).
* **Standard deviation.** TRL's group std is the unbiased one (n - 1) plus 1e-4; ours the population
  std, and a group with all-equal rewards gets advantage 0 in both.
* **Prompts.** TRL draws the step's 4 prompts from a dataset of ``steps x 4`` training pairs sampled
  with the env's seed; our env draws them from the same pairs as it goes. Same distribution, not the
  same sequence.
* **Truncation.** Neither masks truncated replies (a reply cut off before the sum scores 0 in both).

Runs: ``--repeats R`` runs every row R times, alternating (ours, TRL, [async], ours, ...), so both see the
same machine load over time; the table gives each run. When TRL cannot be installed the table says so in
one line and still has our row.

A benchmark, not a test: with the defaults (2 tasks x 2 rows x 40 steps) it takes about an hour on 2 quiet
cores and needs the machine to itself for its timings::

    python bench/trl_comparison.py [--steps 40] [--tasks single,two-digit] [--rows ours,trl]
        [--repeats 1] [--target 0.9] [--window 5] [--seed 0] [--out runs/bench-trl]
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from example_trainer.demo import trainer_overrides  # noqa: E402
from example_trainer.metrics import read_metrics  # noqa: E402

TRL_VERSION = "1.16.0"  # keep equal to VERSION in scripts/setup_trl_bench.sh
# two-digit: operands 10..30 (held-out greedy accuracy of the base model 0.27); with 10..99 it is 0.00
# (every greedy reply starts "To add 25 and 60, we need to..." and runs out of its 16 tokens), no signal
TASKS = {"single": (1, 9), "two-digit": (10, 30)}
# ours = the demo's --schedule overlap; ours-split / ours-turns its other schedules
ROWS = ("ours", "ours-split", "ours-turns", "trl", "trl-async")
HELD_OUT = 30


# ----------------------------------------------------------------------------------------------
# What a run measured
# ----------------------------------------------------------------------------------------------
@dataclass
class Run:
    row: str
    task: str
    rewards: list[float] = field(default_factory=list)  # per step
    step_s: list[float] = field(default_factory=list)  # per step, row to row
    ends: list[float] = field(default_factory=list)  # seconds from the loop's start, per step
    acc_before: Optional[float] = None
    acc_after: Optional[float] = None
    peak_mib: Optional[float] = None
    wall_s: float = 0.0
    error: str = ""

    def median_step(self) -> Optional[float]:
        later = self.step_s[1:] or self.step_s
        return statistics.median(later) if later else None

    def to_target(self, target: float, window: int) -> tuple[Optional[int], Optional[float]]:
        """(step, seconds from the loop's start) at which the trailing mean reward first reaches
        ``target``; (None, None) if it never does."""
        for i in range(window - 1, len(self.rewards)):
            if sum(self.rewards[i - window + 1 : i + 1]) / window >= target:
                return i + 1, self.ends[i]
        return None, None


# ----------------------------------------------------------------------------------------------
# Memory of a process tree, sampled
# ----------------------------------------------------------------------------------------------
class TreeMemory:
    """Samples the summed PSS of a process and its descendants every ``interval`` seconds (PSS, not RSS:
    pages shared between processes, e.g. a forked worker's, are counted once in all)."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float]] = []  # (time.time(), MiB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_full_info().pss
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            self.samples.append((time.time(), total / 2**20))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def peak(self, start: float, end: float) -> Optional[float]:
        inside = [m for t, m in self.samples if start <= t <= end]
        return max(inside) if inside else None


def _run_child(argv: list[str], log: Path, env: dict[str, str]) -> tuple[int, TreeMemory, float]:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        mem = TreeMemory(proc.pid)
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()
            proc.wait(30)
            raise
        finally:
            mem.stop()
    return code, mem, time.perf_counter() - t0


def _tail(path: Path, n: int = 12) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


# ----------------------------------------------------------------------------------------------
# The rows
# ----------------------------------------------------------------------------------------------
def run_ours(args: argparse.Namespace, task: str, out: Path, schedule: str = "overlap") -> Run:
    """Our loop: the SmolLM2 demo preset with ``--schedule`` (overlap, split or turns), its report
    folder read back."""
    lo, hi = TASKS[task]
    argv = [sys.executable, "-m", "example_trainer.demo", "--model", "smollm2"]
    argv += ["--steps", str(args.steps), "--seed", str(args.seed), "--out", str(out)]
    argv += ["--operands", str(lo), str(hi)]
    argv += ["--schedule", schedule]
    for name, value in args.trainer_set.items():
        argv += ["--trainer-set", f"{name}={value}"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}.log"
    code, mem, wall = _run_child(argv, log, env)
    run = Run("ours" if schedule == "overlap" else f"ours-{schedule}", task, wall_s=wall)
    if code != 0:
        run.error = f"our loop failed (exit {code}); see {log}:\n{_tail(log)}"
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
    args: argparse.Namespace, task: str, out: Path, trl_python: str, kind: str, model: Path
) -> Run:
    """TRL's GRPOTrainer (``kind`` sync) or AsyncGRPOTrainer (async, with its own vLLM server)."""
    lo, hi = TASKS[task]
    from example_trainer.demo_smollm2 import LORA_RANK, MAX_REPLY_TOKENS, TRAINER_DTYPE

    out.mkdir(parents=True, exist_ok=True)
    argv = [trl_python, str(REPO / "bench" / "trl_grpo_chat.py"), "--model", str(model)]
    argv += ["--out", str(out), "--trainer", kind, "--steps", str(args.steps)]
    argv += ["--seed", str(args.seed), "--operands", str(lo), str(hi)]
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
        code, mem, wall = _run_child(argv, log, env)
    finally:
        if server is not None:
            _stop(server)
    run = Run(label, task, wall_s=wall)
    result_path = out / "result.json"
    if code != 0 or not result_path.exists():
        run.error = f"{label} failed (exit {code}); see {log}:\n{_tail(log)}"
        return run
    result = json.loads(result_path.read_text())
    begin = float(result["train_begin"])
    steps = sorted((r for r in result["rows"] if "time" in r), key=lambda r: r["step"])
    rewards = {r["step"]: r["reward_mean"] for r in result["rows"] if "reward_mean" in r}
    run.ends = [float(r["time"]) - begin for r in steps]
    run.step_s = [b - a for a, b in zip([0.0, *run.ends[:-1]], run.ends, strict=True)]
    run.rewards = [float(rewards.get(r["step"], 0.0)) for r in steps]
    run.peak_mib = mem.peak(begin, begin + (run.ends[-1] if run.ends else 0.0))
    run.acc_after = _heldout_accuracy(model, args, task, out / "adapter")
    return run


def _start_vllm_for_async(model: Path, out: Path) -> tuple[subprocess.Popen, str]:
    """A vLLM server (the CPU build) with runtime LoRA, the way TRL's async trainer wants it."""
    from atroposlib.inference.vllm_launch import vllm_server
    from atroposlib.utils.net import free_port, wait_for_http
    from example_trainer.demo_smollm2 import LORA_RANK

    port = free_port()
    server = vllm_server(str(model), port, max_model_len=256, dev_mode=True, lora_rank=LORA_RANK)
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


def _heldout_accuracy(
    model: Path, args: argparse.Namespace, task: str, adapter: Optional[Path]
) -> float:
    from atroposlib.utils.chat_arithmetic_task import split_problems
    from example_trainer.chat_eval import chat_greedy_accuracy
    from example_trainer.demo_smollm2 import MAX_REPLY_TOKENS

    _, held = split_problems(*TASKS[task], HELD_OUT, args.seed)
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
    ok = venv / ".atroposlib-trl-bench-ok"
    if not ok.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "setup_trl_bench.sh")], check=False)
    if ok.exists():
        return str(venv / "bin" / "python"), ""
    failed = venv / "install-failed.txt"
    reason = failed.read_text().strip() if failed.exists() else "scripts/setup_trl_bench.sh failed"
    return None, reason


def prepare_model() -> Path:
    from example_trainer.demo_smollm2 import MODEL_CACHE, smollm2_missing

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


def table(task: str, runs: list[Run], args: argparse.Namespace, base: dict[str, Any]) -> str:
    lo, hi = TASKS[task]
    lines = [
        f"\n{task}: 'What is a + b?', a, b in {lo}..{hi}; SmolLM2-135M-Instruct, LoRA r16, "
        f"{args.steps} steps of 4 prompts x 8; target: mean reward of {args.window} steps >= "
        f"{args.target}; base model: held-out greedy accuracy {_f(base.get('acc'), '.2f')}",
        f"{'row':<15} {'s/step med':>10} {'mean':>6} {'to target':>15} {'reward mean':>11} "
        f"{'last 5':>6} {'held-out greedy':>15} {'peak MiB':>9} {'wall':>7}",
    ]
    for r in runs:
        if r.error:
            lines.append(f"{r.row:<15} FAILED: {r.error.splitlines()[0]}")
            continue
        step, secs = r.to_target(args.target, args.window)
        to = f"{secs:.0f} s @ step {step}" if step else "not reached"
        before = base.get("acc") if r.acc_before is None else r.acc_before
        acc = f"{_f(before, '.2f')} -> {_f(r.acc_after, '.2f')}"
        k = min(5, len(r.rewards))
        mean_reward = sum(r.rewards) / len(r.rewards) if r.rewards else None
        last = sum(r.rewards[-k:]) / k if k else None
        mean = sum(r.step_s) / len(r.step_s) if r.step_s else None
        lines.append(
            f"{r.row:<15} {_f(r.median_step(), '.1f'):>10} {_f(mean, '.1f'):>6} {to:>15} "
            f"{_f(mean_reward, '.3f'):>11} {_f(last, '.2f'):>6} {acc:>15} "
            f"{_f(r.peak_mib, '.0f'):>9} {r.wall_s / 60:>6.1f}m"
        )
    lines.extend(_ratios(runs, args))
    return "\n".join(lines)


def _ratios(runs: list[Run], args: argparse.Namespace) -> list[str]:
    """Each other row's figure over ours (medians over repeats): > 1 means ours is faster."""
    ours = [r for r in runs if r.row == "ours" and not r.error]
    out = []
    for label in ("ours-split", "ours-turns", "trl", "trl-async"):
        theirs = [r for r in runs if r.row == label and not r.error]
        if not ours or not theirs:
            continue
        s_ours = statistics.median(x for r in ours if (x := r.median_step()) is not None)
        s_theirs = statistics.median(x for r in theirs if (x := r.median_step()) is not None)
        text = f"{label} / ours: seconds per step x{s_theirs / s_ours:.2f}"
        t_ours = [t for r in ours if (t := r.to_target(args.target, args.window)[1]) is not None]
        t_theirs = [
            t for r in theirs if (t := r.to_target(args.target, args.window)[1]) is not None
        ]
        if t_ours and t_theirs:
            text += f", wall time to target x{statistics.median(t_theirs) / statistics.median(t_ours):.2f}"
        out.append(text)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--tasks", default="single,two-digit", help=f"of {', '.join(TASKS)}")
    p.add_argument("--rows", default="ours,trl", help=f"of {', '.join(ROWS)}")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="TRL's torch threads")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "bench-trl")
    p.add_argument(
        "--trainer-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="an extra setting of our trainer, for our rows (atropos-demo --trainer-set), e.g. "
        "async_lora_load=true",
    )
    args = p.parse_args()
    try:  # checked here, not after a TRL row has run
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    tasks = [t for t in args.tasks.split(",") if t]
    rows = [r for r in args.rows.split(",") if r]
    bad = [t for t in tasks if t not in TASKS] + [r for r in rows if r not in ROWS]
    if bad or args.steps < args.window or args.repeats < 1 or args.window < 1:
        p.error(
            f"unknown task/row {bad}"
            if bad
            else "--steps must be >= --window >= 1 and --repeats >= 1"
        )
    model = prepare_model()
    trl_python, why = (None, "")
    if any(r.startswith("trl") for r in rows):
        trl_python, why = find_trl_python()
        if trl_python is None:
            print(
                f"trl_comparison: TRL {TRL_VERSION} cannot be installed here ({why}); our row only"
            )
            rows = [r for r in rows if not r.startswith("trl")]
    if any(r.startswith("ours") for r in rows):
        from example_trainer.demo_servers import vllm_missing

        missing = vllm_missing()
        if missing:
            print(f"trl_comparison: our rows need vLLM ({missing}); TRL's rows only")
            rows = [r for r in rows if not r.startswith("ours")]
    if not rows:
        raise SystemExit("trl_comparison: nothing can run here")
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "tasks": {}}
    texts = []
    for task in tasks:
        base = {"acc": _heldout_accuracy(model, args, task, None)}
        print(f"[bench] {task}: base model held-out greedy accuracy {base['acc']:.2f}", flush=True)
        runs: list[Run] = []
        for rep in range(args.repeats):
            for row in rows:
                out = args.out / task / f"{row}-{rep}"
                print(f"[bench] {task} {row} run {rep + 1}/{args.repeats} ...", flush=True)
                if row.startswith("ours"):
                    schedule = row.split("-", 1)[1] if "-" in row else "overlap"
                    run = run_ours(args, task, out, schedule)
                else:
                    assert trl_python is not None
                    kind = "sync" if row == "trl" else "async"
                    run = run_trl(args, task, out, trl_python, kind, model)
                print(
                    f"[bench]   {run.error.splitlines()[0] if run.error else 'done'} "
                    f"({run.wall_s / 60:.1f} min)",
                    flush=True,
                )
                runs.append(run)
        text = table(task, runs, args, base)
        print(text, flush=True)
        texts.append(text)
        report["tasks"][task] = {"base": base, "runs": [vars(r) for r in runs]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.txt").write_text("\n".join(texts) + "\n")
    (args.out / "result.json").write_text(json.dumps(report, indent=1, default=str))
    if why:
        print(f"(TRL rows left out: {why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

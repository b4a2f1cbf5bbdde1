"""How ``trl_comparison.py`` runs a row and what it keeps of it: a child process with its log and the
summed memory of its process tree, our demo with a row's schedule, and one ``Run`` per row and seed
(per-step rewards, step seconds and end times, held-out figures, peak memory, the error if it failed)."""

from __future__ import annotations

import argparse
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


# ----------------------------------------------------------------------------------------------
# What a run measured
# ----------------------------------------------------------------------------------------------
@dataclass
class Run:
    row: str
    task: str
    seed: int = 0
    rewards: list[float] = field(default_factory=list)  # per step
    step_s: list[float] = field(default_factory=list)  # per step, row to row
    ends: list[float] = field(default_factory=list)  # seconds from the loop's start, per step
    acc_before: Optional[float] = None
    acc_after: Optional[float] = None
    peak_mib: Optional[float] = None
    wall_s: float = 0.0
    error: str = ""
    drifts: Optional[int] = None  # calculator, ours: token drifts over the sequences checked
    outcomes: dict[str, int] = field(default_factory=dict)  # calculator: episodes by outcome
    heldout: dict[int, float] = field(default_factory=dict)  # calculator: {step: held-out success}

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

    def report(self) -> str:
        """The bench's line after the run: done, or its error's first line, and its wall time."""
        said = self.error.splitlines()[0] if self.error else "done"
        return f"[bench]   {said} ({self.wall_s / 60:.1f} min)"

    def heldout_to_target(self, target: float) -> tuple[Optional[int], Optional[float]]:
        """(step, seconds from the loop's start) of the first scored checkpoint whose held-out
        success reaches ``target``; (None, None) if none did or none was scored."""
        for step in sorted(self.heldout):
            if self.heldout[step] >= target and step <= len(self.ends):
                return step, self.ends[step - 1]
        return None, None


# ----------------------------------------------------------------------------------------------
# Memory of a process tree, sampled
# ----------------------------------------------------------------------------------------------
class TreeMemory:
    """Samples the summed PSS of a process and its descendants every ``interval`` seconds (PSS, not RSS:
    pages shared between processes, e.g. a forked worker's, are counted once in all). Every 2 s: a
    sample reads every process's page map, and at 0.5 s the sampler took ~10% of a core (measured on 2
    cores), time our split schedule's trainer lost on its one core."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
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


def run_child(argv: list[str], log: Path, env: dict[str, str]) -> tuple[int, TreeMemory, float]:
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


def tail(path: Path, n: int = 12) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


def run_demo(
    args: argparse.Namespace,
    task: str,
    out: Path,
    seed: int,
    schedule: str,
    task_flags: list[str],
) -> tuple[int, TreeMemory, Path, Run]:
    """Run the SmolLM2 demo for one of our rows (``task_flags`` pick its task); (exit code, its
    memory samples, its log, the row's ``Run`` with the wall time)."""
    argv = [sys.executable, "-m", "demo", "--model", "smollm2", *task_flags]
    argv += ["--steps", str(args.steps), "--seed", str(seed), "--out", str(out)]
    argv += ["--schedule", schedule]
    for name, value in args.trainer_set.items():
        argv += ["--trainer-set", f"{name}={value}"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}.log"
    code, mem, wall = run_child(argv, log, env)
    row = "ours" if schedule == "overlap" else f"ours-{schedule}"
    return code, mem, log, Run(row, task, seed, wall_s=wall)


def read_trl_rows(run: Run, result: dict[str, Any], mem: TreeMemory) -> None:
    """Per-step end times, step seconds, rewards and the peak memory of a TRL run's ``result.json``."""
    begin = float(result["train_begin"])
    steps = sorted((r for r in result["rows"] if "time" in r), key=lambda r: r["step"])
    rewards = {r["step"]: r["reward_mean"] for r in result["rows"] if "reward_mean" in r}
    run.ends = [float(r["time"]) - begin for r in steps]
    run.step_s = [b - a for a, b in zip([0.0, *run.ends[:-1]], run.ends, strict=True)]
    run.rewards = [float(rewards.get(r["step"], 0.0)) for r in steps]
    run.peak_mib = mem.peak(begin, begin + (run.ends[-1] if run.ends else 0.0))


def schedule_of(row: str) -> str:
    """The demo's ``--schedule`` of one of our rows: ``ours`` is overlap, ``ours-X`` is X."""
    return row.split("-", 1)[1] if "-" in row else "overlap"

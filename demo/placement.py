"""Where the demo's threads run under ``--schedule``: vLLM's workers and the trainer on their own
cores (``split``), or on every core in turn (``turns``), and the cores the launcher's processes inherit."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import Any, Optional


def placement(
    schedule: str, threads: int, cores: list[int]
) -> tuple[dict[str, str], dict[str, Any]]:
    """(vLLM's environment, the trainer's flags) that place their threads on ``cores`` for a schedule:

    * overlap: vLLM binds its worker threads itself (on a CPU: one core, another kept for its
      scheduler); the trainer runs ``threads`` threads wherever the OS puts them;
    * split: vLLM's workers on the first half of the cores, the trainer pinned to the rest with one
      thread per core, so the two never wait for each other's cores while they overlap (everything
      else the demo starts stays on vLLM's half too: ``launcher_cores``);
    * turns: they alternate, so each gets every core: vLLM's workers on all of them, the trainer
      ``threads`` threads.
    """
    listed = ",".join(map(str, cores))
    if schedule == "split":
        if len(cores) < 2:
            raise ValueError(f"--schedule split needs 2 cores or more (this process has {listed})")
        half = len(cores) // 2
        vllm_env = {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores[:half]))}
        return vllm_env, {"cpu_cores": cores[half:], "torch_threads": len(cores) - half}
    if schedule == "turns":
        return {"VLLM_CPU_OMP_THREADS_BIND": listed}, {"torch_threads": threads}
    return {}, {"torch_threads": threads}


def launcher_cores(schedule: str, cores: list[int]) -> Optional[list[int]]:
    """The cores the processes the launcher starts inherit (run-api, vLLM's API server, engine core
    and workers, the env) under ``split``: vLLM's half. vLLM's engine core polls its workers' output
    in a busy loop while they run a model step; left anywhere, it took a third of the trainer's core
    (measured, 2 cores). The trainer pins itself to its own half (``--cpu-cores``). None: no pinning."""
    if schedule != "split" or len(cores) < 2:
        return None
    return cores[: len(cores) // 2]


@contextlib.contextmanager
def kept_on(cores: Optional[list[int]]) -> Iterator[None]:
    """Run the block with this process pinned to ``cores`` (what the processes it starts inherit),
    then give it back its cores; ``None`` leaves it alone."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cores))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def this_process_cores() -> list[int]:
    """The cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def trainer_threads(args: argparse.Namespace) -> int:
    """The trainer's torch threads in this demo: ``--threads``, or under ``--schedule split`` one per
    core of its half (what the matmul peak is measured at)."""
    if args.schedule == "split":
        _, flags = placement(args.schedule, args.threads, this_process_cores())
        return int(flags["torch_threads"])
    return int(args.threads)

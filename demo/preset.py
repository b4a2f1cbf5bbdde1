"""What a demo preset is (``Preset``: a model, a task, its defaults and its three steps), what its
topology step returns (``TopologyParts``) and what its report step is given (``RunResult``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass
class TopologyParts:
    """A preset's sections of the demo's topology (the demo adds run-api, the process environment,
    ``--trainer-set`` and the supervision): inference servers, envs, the trainer's flags, and the
    environment variables of its processes."""

    inference: list[dict[str, Any]]
    envs: list[dict[str, Any]]
    trainer_flags: dict[str, Any]
    env_vars: dict[str, str] = field(default_factory=dict)


@dataclass
class RunResult:
    """What a finished run hands its preset's report: the report folder, the flags, what ``prepare``
    returned, the trainer's metrics rows, groups sampled early and late, the wall times, the preset."""

    out: Path
    args: argparse.Namespace
    prep: dict[str, Any]
    rows: list[dict[str, Any]]
    early: list[dict[str, Any]]
    late: list[dict[str, Any]]
    loop_s: float
    total_s: float
    preset: Preset


def nothing_missing() -> Optional[str]:
    """A preset that needs nothing beyond the install."""
    return None


@dataclass(frozen=True)
class Preset:
    """One demo preset, chosen by ``--model MODEL --task TASK``.

    ``defaults`` fill the flags left unset (steps, prompts_per_step, group_size, lr, warmup_sft_steps,
    threads, and the preset's own ``settings``); ``servers`` are the ``--inference`` servers it runs on,
    the first its default; ``settings`` are the preset-only flags it takes (``operands``, ``heldout``);
    ``split_cores``: ``--schedule split`` may place vLLM's workers and the trainer; ``auto_split``:
    ``--schedule auto`` picks split on 2 cores or more. The three steps: ``prepare(out, args)`` builds
    or measures the starting model (a dict with ``warm``, ``warm_acc``, ``warm_s``, ``n_params``),
    ``topology_parts(args, model_dir, out)`` its sections of the topology, ``report(result)`` writes the
    report folder and returns the exit code. ``missing()`` says why it cannot run here, or None."""

    model: str
    task: str
    help: str
    folder: str
    env_file: Path
    intro: str
    defaults: Mapping[str, Any]
    prepare: Callable[[Path, argparse.Namespace], dict[str, Any]]
    topology_parts: Callable[[argparse.Namespace, Path, Path], TopologyParts]
    report: Callable[[RunResult], int]
    servers: tuple[str, ...] = ("engine", "vllm")
    settings: frozenset[str] = frozenset()
    split_cores: bool = False
    auto_split: bool = False
    trainer_dtype: str = "float32"
    missing: Callable[[], Optional[str]] = nothing_missing

    @property
    def name(self) -> str:
        """``MODEL TASK``, as the help and the error lines name it."""
        return f"{self.model} {self.task}"

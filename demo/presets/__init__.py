"""The demo's presets, one module each, registered here (one line a preset): ``--model`` and ``--task``
pick one, and the first is the default. A new preset is a module with a ``PRESET`` (``demo.preset.Preset``:
its defaults, prepare, topology parts and report) and its line in ``PRESETS``."""

from __future__ import annotations

import argparse

from demo.preset import Preset
from demo.presets import (
    smollm2_arithmetic,
    smollm2_bfcl,
    smollm2_calculator,
    smollm2_calculator_agent,
    smollm2_harbor,
    tiny_arithmetic,
)

PRESETS: tuple[Preset, ...] = (
    tiny_arithmetic.PRESET,
    smollm2_arithmetic.PRESET,
    smollm2_calculator.PRESET,
    smollm2_calculator_agent.PRESET,
    smollm2_bfcl.PRESET,
    smollm2_harbor.PRESET,
)
DEFAULT = PRESETS[0]


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def model_names() -> list[str]:
    """Every ``--model`` some preset trains, in registration order."""
    return _unique([p.model for p in PRESETS])


def task_names() -> list[str]:
    """Every ``--task`` some preset runs, in registration order."""
    return _unique([p.task for p in PRESETS])


def find_preset(model: str, task: str) -> Preset:
    """The preset of ``model`` on ``task``; ``ValueError`` (one line saying which models run the task)
    when none is registered."""
    for p in PRESETS:
        if (p.model, p.task) == (model, task):
            return p
    models = [p.model for p in PRESETS if p.task == task]
    if not models:
        raise ValueError(f"no preset runs --task {task}")
    raise ValueError(f"--task {task} runs with " + " or ".join(f"--model {m}" for m in models))


def preset_of(args: argparse.Namespace) -> Preset:
    """The preset the parsed flags chose."""
    return find_preset(args.model, args.task)


def flag_label(p: Preset) -> str:
    """The flags that choose ``p``, as a user types them (the default task left out)."""
    label = f"--model {p.model}"
    return label if p.task == DEFAULT.task else f"{label} --task {p.task}"


def labels_of(chosen: list[Preset]) -> str:
    """``chosen`` presets named by their flags, joined with ``or``."""
    return " or ".join(flag_label(p) for p in chosen)


def per_preset(key: str) -> str:
    """Each preset's default for the flag ``key``, for the help (``tiny arithmetic 300, ...``)."""
    return ", ".join(f"{p.name} {p.defaults[key]}" for p in PRESETS if key in p.defaults)


__all__ = [
    "DEFAULT",
    "PRESETS",
    "Preset",
    "find_preset",
    "flag_label",
    "labels_of",
    "model_names",
    "per_preset",
    "preset_of",
    "task_names",
]

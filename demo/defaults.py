"""The chosen preset's defaults, filled into the flags left unset: its sizes and threads, its first
inference server, the schedule ``auto`` stands for, and the report folder under runs/."""

from __future__ import annotations

import argparse

from demo.paths import RUNS
from demo.placement import this_process_cores
from demo.presets import Preset


def fill_defaults(args: argparse.Namespace, preset: Preset) -> None:
    """Set every flag ``preset`` has a default for and the user left unset (in place)."""
    for key, value in preset.defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.inference is None:
        args.inference = preset.servers[0]
    if args.schedule == "auto":
        args.schedule = auto_schedule(preset)
    if args.out is None:
        args.out = RUNS / (preset.folder + ("-control" if args.control == "shuffled" else ""))


def auto_schedule(preset: Preset) -> str:
    """``split`` where the preset measured fastest with its cores divided (2 cores or more), else
    ``overlap``."""
    return "split" if preset.auto_split and len(this_process_cores()) >= 2 else "overlap"

"""The demo's checks of flag combinations, made while parsing (a usage error, one line, exit 2) so a
typo never wipes the report folder: what the chosen preset takes, where it runs, how it may schedule."""

from __future__ import annotations

import argparse

from atroposlib.utils.cli import CliParser
from demo.flags import PRESET_SETTINGS
from demo.placement import this_process_cores
from demo.presets import PRESETS, Preset, flag_label, labels_of

SERVER_NAMES = {"engine": "atroposlib's CPU engine", "vllm": "a real vLLM server"}


def check_combinations(p: CliParser, args: argparse.Namespace, preset: Preset) -> None:
    """Refuse (``p.error``) a setting ``preset`` does not take, a server it does not run on, a
    schedule it cannot use, an empty operand range."""
    _check_settings(p, args, preset)
    _check_schedule(p, args, preset)
    if args.operands is not None and args.operands[1] < args.operands[0]:
        p.error(f"--operands: HIGH ({args.operands[1]}) is below LOW ({args.operands[0]})")
    if args.inference is not None and args.inference not in preset.servers:
        server, first = SERVER_NAMES[preset.servers[0]], preset.servers[0]
        p.error(f"{flag_label(preset)} runs on {server}: use --inference {first}")


def _check_settings(p: CliParser, args: argparse.Namespace, preset: Preset) -> None:
    for name in PRESET_SETTINGS:
        if getattr(args, name) is not None and name not in preset.settings:
            takers = [pr for pr in PRESETS if name in pr.settings]
            flag = name.replace("_", "-")
            p.error(f"--{flag} applies to {labels_of(takers)}")


def _check_schedule(p: CliParser, args: argparse.Namespace, preset: Preset) -> None:
    if args.schedule != "split":
        return
    if not preset.split_cores:
        takers = labels_of([pr for pr in PRESETS if pr.split_cores])
        p.error(f"--schedule split applies to {takers} (vLLM's worker threads are placed)")
    if len(this_process_cores()) < 2:
        p.error("--schedule split needs 2 CPU cores or more")

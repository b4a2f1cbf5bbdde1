"""The demo as a launch topology: run-api, the chosen preset's inference servers, envs and trainer
(``Preset.topology_parts``), every process's environment, ``--trainer-set``, and no restarts (for the
tiny preset, what configs/launch/demo_cpu.yaml describes, with the demo's flags filled in)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from demo.child_env import child_env
from demo.presets import preset_of


def process_env(args: argparse.Namespace, out: Path) -> dict[str, str]:
    """The variables the topology sets for every process: those of ``child_env`` this process lacks
    or holds otherwise (the launcher puts this checkout first on the path itself), vLLM's cache."""
    env = {
        k: v
        for k, v in child_env(args.threads).items()
        if k not in os.environ or k == "PYTHONPATH" or os.environ[k] != v
    }
    env.pop("PYTHONPATH", None)  # the launcher puts this checkout first
    if args.inference == "vllm":
        env["VLLM_CACHE_ROOT"] = str(out / "vllm-cache")
    return env


def demo_topology(args: argparse.Namespace, model_dir: Path, out: Path) -> Any:
    """The parsed topology of this run, its model served from ``model_dir``, its files under ``out``."""
    from atroposlib.launch.topology import parse_topology

    parts = preset_of(args).topology_parts(args, model_dir, out)
    return parse_topology(
        {
            "name": "demo",
            "env": {**process_env(args, out), **parts.env_vars},
            "inference": parts.inference,
            "envs": parts.envs,
            "trainer": {"flags": {**parts.trainer_flags, **args.trainer_set}},
            # the demo is a short, watched run: a crash stops it (nothing is restarted)
            "supervision": {"max_restarts": 0},
        },
        source="atropos-demo",
    )

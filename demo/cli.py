"""The end-to-end CPU demo's command line (``atropos-demo``, ``python -m demo``, ``bash scripts/demo.sh``).

The default preset: a tiny model learns single-digit addition through the real RL loop, on loopback:

1. builds a tiny Llama (~0.9M parameters, its own byte-level tokenizer) from nothing, in seconds;
2. **warm-up phase**: a few seconds of supervised training on gold demonstrations drawn from the task's
   own generator (a random model never samples a right answer, so RL would see only zero rewards);
3. starts, as separate processes: ``run-api`` (trajectory API), the CPU inference engine serving the
   warmed-up model, the arithmetic environment (``environments/arithmetic_server.py serve``) and the
   GRPO trainer, which pulls batches from the API, trains, and pushes its weights to the engine after
   every step (``--weight-refresh reload``);
4. prints a live line (step, reward, tokens/s) and finally writes the report folder: ``metrics.jsonl``
   (one object per trainer step, with ``step`` and ``reward_mean``), ``reward_curve.png``,
   ``rollouts.html`` (sampled groups early and late in the run), ``summary.txt`` and ``summary.json``.

``--control shuffled`` runs the same thing with each group's rewards shuffled inside the trainer: the
reward then carries no information, and the curve must stay flat. Both runs print the mean reward of
the first and the last 50 steps. ``--model`` and ``--task`` pick another preset (``demo/presets/``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from atroposlib.utils.cli import fail
from demo.checks import check_combinations
from demo.defaults import fill_defaults
from demo.flags import build_parser
from demo.presets import find_preset
from demo.run import run
from demo.servers import vllm_missing
from demo.trainer_set import trainer_overrides


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parse the demo's flags; counts and combinations are checked here so a typo never wipes the
    report folder. Flags left unset take the chosen preset's defaults."""
    p = build_parser()
    args = p.parse_args(argv)
    try:
        args.trainer_set = trainer_overrides(args.trainer_set)
    except ValueError as e:
        p.error(f"--trainer-set: {e}")
    try:
        preset = find_preset(args.model, args.task)
    except ValueError as e:
        p.error(str(e))
    check_combinations(p, args, preset)
    fill_defaults(args, preset)
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    preset = find_preset(args.model, args.task)
    if not preset.env_file.exists():
        return fail(
            "atropos-demo", f"{preset.env_file} is missing (run from a checkout of the repository)"
        )
    missing = vllm_missing() if args.inference == "vllm" else None
    if missing is None:
        missing = preset.missing()
    if missing:
        return fail("atropos-demo", missing)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

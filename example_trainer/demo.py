"""The end-to-end demo lives in the top-level ``demo/`` package (``demo.cli``); this module keeps
``python -m example_trainer.demo`` and its old names working, and is the only demo file here."""

import sys

from demo.child_env import child_env as _child_env
from demo.cli import main, parse_args
from demo.placement import trainer_threads
from demo.report import first_last, reward_change
from demo.topology import demo_topology
from demo.trainer_set import DEMO_OWNED_FIELDS, trainer_overrides

__all__ = [
    "DEMO_OWNED_FIELDS",
    "_child_env",
    "demo_topology",
    "first_last",
    "main",
    "parse_args",
    "reward_change",
    "trainer_overrides",
    "trainer_threads",
]

if __name__ == "__main__":
    sys.exit(main())

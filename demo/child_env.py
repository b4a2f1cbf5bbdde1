"""The environment variables of every process the demo starts: offline, quiet, a set number of
OpenMP threads, and this checkout first on ``PYTHONPATH``."""

from __future__ import annotations

import os

from demo.paths import REPO


def child_settings(threads: int) -> dict[str, str]:
    """The variables every demo process gets: offline, quiet, ``threads`` threads."""
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads),
        "TRANSFORMERS_VERBOSITY": "error",
    }


def child_env(threads: int) -> dict[str, str]:
    """This process's environment with ``child_settings(threads)`` and the checkout on the path."""
    env = dict(os.environ)
    env.update(child_settings(threads))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env

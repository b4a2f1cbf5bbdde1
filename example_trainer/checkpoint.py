"""Resumable checkpoints: model (HF folder), optimizer, scheduler, RNG states and step.

Layout under ``<save_path>/checkpoints/``: one ``step_NNNNNNN/`` folder per checkpoint holding the model
(``save_pretrained``), the tokenizer and ``trainer_state.pt``; ``latest`` names the newest complete one
(written last, atomically, so a crash mid-save never points at a half-written folder).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.random.get_rng_state()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # numpy is optional for the trainer
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.random.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def publishable(model: Any, state_dict: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The tensors a published model holds, by checkpoint name: the model's state dict (or the given
    full ``state_dict``) without the aliases of tied weights (``lm_head`` = ``embed_tokens``), which
    ``save_pretrained`` leaves out of the model's own and an explicit dict would write twice."""
    source = state_dict if state_dict is not None else model.state_dict()
    first: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        first.setdefault(id(param), name)
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    keep = set(first.values())
    return {n: t for n, t in source.items() if n not in params or n in keep}


def cast_state_dict(
    model: Any, state_dict: Optional[dict[str, Any]], dtype: torch.dtype
) -> dict[str, Any]:
    """``publishable`` with every floating tensor in ``dtype`` (cast one tensor at a time)."""
    return {
        name: tensor.to(dtype) if tensor.is_floating_point() else tensor
        for name, tensor in publishable(model, state_dict).items()
    }


def weights_bytes(folder: Path) -> int:
    """Bytes of the weight files (``*.safetensors``) in a saved model folder."""
    return sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))


def _set_saved_dtype(folder: Path, dtype: torch.dtype) -> None:
    """Record ``dtype`` in the saved ``config.json`` (``save_pretrained`` writes the dtype of the
    model's parameters, the fp32 masters, not of the tensors it was handed)."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    name = str(dtype).replace("torch.", "")
    for key in ("dtype", "torch_dtype"):
        if key in config:
            config[key] = name
    if "dtype" not in config and "torch_dtype" not in config:
        config["torch_dtype"] = name
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def save_model_folder(
    model: Any,
    tokenizer: Any,
    out: Path,
    state_dict: Optional[dict[str, Any]] = None,
    dtype: Optional[torch.dtype] = None,
) -> Path:
    """``save_pretrained`` of model (+ tokenizer) into ``out`` via a temporary folder and a rename.

    ``state_dict``: a gathered full state dict (FSDP); by default the model's own. ``dtype``: write
    the floating weights in this dtype (published weights: the compute dtype, e.g. bf16 from fp32
    masters, half the bytes); None = as they are (checkpoints keep the masters for an exact resume)."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    if dtype is not None and any(
        p.is_floating_point() and p.dtype != dtype for p in model.parameters()
    ):
        model.save_pretrained(
            tmp, safe_serialization=True, state_dict=cast_state_dict(model, state_dict, dtype)
        )
        _set_saved_dtype(tmp, dtype)
    elif state_dict is not None:
        model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
    else:
        model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


@dataclass
class Checkpoint:
    path: Path
    step: int
    state: dict[str, Any]


def save_checkpoint(
    save_path: Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: Optional[dict[str, Any]] = None,
    keep: int = 2,
    state_dict: Optional[dict[str, Any]] = None,
    optimizer_state: Optional[dict[str, Any]] = None,
) -> Path:
    """Write ``step_NNNNNNN/`` and point ``latest`` at it. FSDP passes the gathered full ``state_dict``
    and ``optimizer_state`` (keyed by parameter name); otherwise the model's and optimizer's own."""
    root = Path(save_path) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    folder = save_model_folder(model, tokenizer, root / f"step_{step:07d}", state_dict)
    state = {
        "step": step,
        "optimizer": optimizer_state if optimizer_state is not None else optimizer.state_dict(),
        "optimizer_format": "full" if optimizer_state is not None else "local",
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_state(),
        "extra": extra or {},
    }
    torch.save(state, folder / "trainer_state.pt")
    tmp = root / "latest.tmp"
    tmp.write_text(folder.name)
    os.replace(tmp, root / "latest")
    old = sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))
    for p in old[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    return folder


def load_latest(save_path: Path) -> Optional[Checkpoint]:
    """The newest complete checkpoint under ``save_path`` or None."""
    root = Path(save_path) / "checkpoints"
    pointer = root / "latest"
    if not pointer.exists():
        return None
    folder = root / pointer.read_text().strip()
    state_file = folder / "trainer_state.pt"
    if not state_file.exists():
        return None
    state = torch.load(state_file, map_location="cpu", weights_only=False)
    return Checkpoint(path=folder, step=int(state["step"]), state=state)

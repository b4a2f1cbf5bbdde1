"""Load a local transformers model directory (weights + tokenizer) with clear errors for bad folders."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import ModelLoadError
from atroposlib.utils.hf_compat import dtype_kwargs
from atroposlib.utils.tokenizer_loading import load_tokenizer as _load_tokenizer

log = logging.getLogger(__name__)

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def local_path(path: str | Path) -> Path:
    """``path`` with ``~`` expanded; a ``~name`` of no known user stays as written (a relative
    path, most likely missing) rather than failing: a request's path is checked, not trusted."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return Path(path)


def check_model_dir(path: Path) -> None:
    """Cheap checks (no torch import) that ``path`` looks like a transformers model directory."""
    if not path.exists():
        raise ModelLoadError(f"model directory not found: {path}")
    if not path.is_dir():
        raise ModelLoadError(f"model path is not a directory: {path}")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"not a transformers model directory (no config.json): {path}")


def load_causal_lm(path: str | Path, dtype: str = "float32", device: str = "cpu") -> Any:
    """Load weights of a causal LM from ``path`` onto ``device`` in eval mode; raise ``ModelLoadError``
    on any failure."""
    import torch
    from transformers import AutoModelForCausalLM

    p = local_path(path)
    check_model_dir(p)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(p), **dtype_kwargs(getattr(torch, _DTYPES[dtype]))
        )
    except Exception as e:  # any loader failure is a bad directory from the user's point of view
        log.debug("model load failed", exc_info=True)
        raise ModelLoadError(f"could not load a causal LM from {p}: {type(e).__name__}: {e}") from e
    if device != "cpu":
        try:
            model.to(device)
        except Exception as e:  # no such device, or out of its memory
            raise ModelLoadError(
                f"could not move the model from {p} to {device}: {type(e).__name__}: {e}"
            ) from e
    model.eval()
    return model


def load_tokenizer(path: str | Path) -> Any:
    """Load the tokenizer saved next to the model (the package's loader, after the model-directory
    checks); raise ``ModelLoadError`` if there is none."""
    p = local_path(path)
    check_model_dir(p)
    return _load_tokenizer(p, hint=f"the model directory {p} needs the tokenizer saved with it")


@dataclass
class LoadedModel:
    """A model, its tokenizer and the token ids the engine needs."""

    model: Any
    tokenizer: Any
    path: Path
    pad_id: int
    eos_ids: set[int]
    max_model_len: int

    def decode(self, ids: list) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def eos_ids_of(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config):
        val = getattr(src, "eos_token_id", None) if src is not None else None
        if isinstance(val, int):
            ids.add(val)
        elif isinstance(val, (list, tuple)):
            ids.update(int(v) for v in val)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


def load_model_dir(
    path: str | Path,
    dtype: str = "float32",
    max_model_len: Optional[int] = None,
    device: str = "cpu",
) -> LoadedModel:
    """Load model + tokenizer from one directory and work out pad/eos ids and the context length."""
    tokenizer = load_tokenizer(path)
    model = load_causal_lm(path, dtype, device)
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    ctx = max_model_len or int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    return LoadedModel(
        model,
        tokenizer,
        local_path(path).resolve(),
        int(pad),
        eos_ids_of(model, tokenizer),
        ctx,
    )


__all__ = [
    "LoadedModel",
    "check_model_dir",
    "eos_ids_of",
    "load_causal_lm",
    "load_model_dir",
    "load_tokenizer",
    "local_path",
]

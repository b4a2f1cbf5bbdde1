"""A tiny byte-level BPE tokenizer with a ChatML template, trained locally for tests (offline, < 1 s)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Optional

_TOKENIZER_LOCK = threading.Lock()
_TOKENIZER_DIR: Optional[Path] = None


def build_tiny_tokenizer(out_dir: Path) -> Path:
    """Train and save a small byte-level BPE tokenizer with a ChatML template (offline, < 1 s)."""
    from atroposlib.inference.tiny_model import build_tokenizer, default_corpus

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer(default_corpus(seed=0, n_lines=600), vocab_size=384).save_pretrained(
        str(out_dir)
    )
    return out_dir


def tiny_tokenizer_dir() -> Path:
    """A process-wide tiny tokenizer directory, built on first use and removed when the process exits."""
    global _TOKENIZER_DIR
    with _TOKENIZER_LOCK:
        if _TOKENIZER_DIR is None:
            made = Path(tempfile.mkdtemp(prefix="atropos-tiny-tok-"))
            atexit.register(shutil.rmtree, made, ignore_errors=True)
            _TOKENIZER_DIR = build_tiny_tokenizer(made)
        return _TOKENIZER_DIR

"""Optional tokenizer for the tools: load it (a local folder or a hub id) and make decoders.

Loading goes through ``transformers.AutoTokenizer`` (no torch needed). A local directory always works
offline; a hub id works online or from the local cache. Failures become ``ModelLoadError`` with a
one-line message, so the CLIs can print it without a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from atroposlib.errors import ModelLoadError

log = logging.getLogger(__name__)


def load_tokenizer(name_or_path: str) -> Any:
    """``AutoTokenizer.from_pretrained(name_or_path)``; raises ``ModelLoadError`` on failure."""
    p = Path(name_or_path).expanduser()
    looks_local = p.exists() or name_or_path.startswith((".", "/", "~"))
    if looks_local and not p.is_dir():
        raise ModelLoadError(f"tokenizer directory not found: {name_or_path}")
    from transformers import AutoTokenizer  # lazy: keeps CLI start-up fast when unused

    if not looks_local:
        try:  # a cached hub tokenizer loads without any network round trip
            return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
        except Exception:  # noqa: BLE001 - not cached: fall through to the online attempt below
            log.debug("tokenizer %s not in the local cache; trying the hub", name_or_path)
    try:
        return AutoTokenizer.from_pretrained(str(p) if looks_local else name_or_path)
    except Exception as e:  # noqa: BLE001 - every loader failure becomes one clear message
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"cannot load tokenizer {name_or_path!r}: {first}") from e


def make_decoder(tok: Any) -> Callable[[list[int]], str]:
    """A function that decodes a list of ids, keeping special tokens (they are part of the text)."""

    def decode(ids: list[int]) -> str:
        return tok.decode(list(ids), skip_special_tokens=False)

    return decode


def make_token_text(tok: Any) -> Callable[[int], str]:
    """A function that shows one token id as text (byte-level markers turned back into spaces)."""
    cache: dict[int, str] = {}

    def token_text(token_id: int) -> str:
        s = cache.get(token_id)
        if s is None:
            try:
                s = tok.decode([token_id], skip_special_tokens=False)
            except Exception:  # noqa: BLE001 - an id outside the vocab is shown by number
                s = f"[{token_id}]"
            if s == "":
                s = f"[{token_id}]"
            cache[token_id] = s
        return s

    return token_text


def optional_tokenizer(name_or_path: Optional[str]) -> Optional[Any]:
    """``load_tokenizer`` when a name is given, else None."""
    return load_tokenizer(name_or_path) if name_or_path else None


__all__ = ["load_tokenizer", "make_decoder", "make_token_text", "optional_tokenizer"]

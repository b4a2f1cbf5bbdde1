"""Optional tokenizer for the tools: load it (a local folder or a hub id) and make decoders.

Loading is the package's one loader (``atroposlib.utils.tokenizer_loading``) with the tools' hint: a
local directory always works offline; a hub id works online or from the local cache. Failures become
``ModelLoadError`` with a one-line message, so the CLIs can print it without a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from atroposlib.utils.tokenizer_loading import load_tokenizer as _load_tokenizer

TOOLS_HINT = "pass --tokenizer a local tokenizer directory (or a hub id when online)"


def load_tokenizer(name_or_path: str) -> Any:
    """The package's loader (``utils.tokenizer_loading``) with the tools' hint."""
    return _load_tokenizer(name_or_path, hint=TOOLS_HINT)


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


__all__ = ["TOOLS_HINT", "load_tokenizer", "make_decoder", "make_token_text", "optional_tokenizer"]

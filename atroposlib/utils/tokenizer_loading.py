"""Loading a tokenizer by hub name or local directory, with a one-line error on failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from atroposlib.errors import ModelLoadError

_PLAIN_FAST_TOKENIZERS = ("PreTrainedTokenizerFast", "TokenizersBackend")


def load_tokenizer(name: str) -> Any:
    """``AutoTokenizer.from_pretrained(name)`` with a one-line error that says what to change.

    A local directory saved as a plain ``PreTrainedTokenizerFast`` (our tiny models) is loaded with
    that class directly, which avoids the torch import ``AutoTokenizer`` triggers (seconds on CPU).
    A name that is clearly a path (starts with ``.``, ``/`` or ``~``, or has more than one ``/``;
    hub ids are ``org/name``) and does not exist is reported as a missing directory, not as a
    malformed hub id."""
    local = Path(name).expanduser()
    if not local.exists() and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise ModelLoadError(
            f"tokenizer directory not found: {name!r}; set --env.tokenizer_name to an existing "
            "local tokenizer directory (or a hub name when online)"
        )
    try:
        cfg_path = Path(name) / "tokenizer_config.json"
        if (
            cfg_path.is_file()
            and json.loads(cfg_path.read_text()).get("tokenizer_class") in _PLAIN_FAST_TOKENIZERS
        ):
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast.from_pretrained(name)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except (
        Exception
    ) as e:  # transformers raises OSError/ValueError/HTTP errors depending on the cause
        lines = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
        raise ModelLoadError(
            f"cannot load tokenizer {name!r} ({reason}); set --env.tokenizer_name to a local "
            "tokenizer directory (or a hub name when online)"
        ) from e


__all__ = ["load_tokenizer"]

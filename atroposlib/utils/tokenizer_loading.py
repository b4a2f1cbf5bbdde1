"""The package's one tokenizer loader: a hub name or a local directory, a one-line error on failure.

Every part uses it: the env runtime (``BaseEnv``), the tools (``frontend.tokenizer``, with their own
hint) and the inference engine (``inference.loading``, after its model-directory checks). ``hint``
says what the caller's user should change; it ends both error messages.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from atroposlib.errors import ModelLoadError

log = logging.getLogger(__name__)

_PLAIN_FAST_TOKENIZERS = ("PreTrainedTokenizerFast", "TokenizersBackend")
ENV_HINT = (
    "set --env.tokenizer_name to an existing local tokenizer directory (or a hub name when online)"
)


def load_tokenizer(name: str | Path, hint: str = ENV_HINT) -> Any:
    """``AutoTokenizer.from_pretrained(name)`` with a one-line ``ModelLoadError`` ending in ``hint``.

    A name that is clearly a path (it exists, starts with ``.``, ``/`` or ``~``, or has more than
    one ``/``; hub ids are ``org/name``) must be a directory, else it is reported as a missing
    directory, not as a malformed hub id. A local directory saved as a plain
    ``PreTrainedTokenizerFast`` (our tiny models) is loaded with that class directly, which avoids
    the torch import ``AutoTokenizer`` triggers (seconds on CPU). A hub id is first looked up in the
    local cache (no network round trip), then on the hub."""
    name = str(name)
    local = Path(name).expanduser()
    path_like = local.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1
    if path_like and not local.is_dir():
        raise ModelLoadError(f"tokenizer directory not found: {name!r}; {hint}")
    try:
        if path_like:
            cfg_path = local / "tokenizer_config.json"
            if (
                cfg_path.is_file()
                and json.loads(cfg_path.read_text()).get("tokenizer_class")
                in _PLAIN_FAST_TOKENIZERS
            ):
                from transformers import PreTrainedTokenizerFast

                return PreTrainedTokenizerFast.from_pretrained(str(local))
        from transformers import AutoTokenizer  # lazy: keeps start-up fast when unused

        if not path_like:
            try:  # a cached hub tokenizer loads without any network round trip
                return AutoTokenizer.from_pretrained(name, local_files_only=True)
            except Exception:  # noqa: BLE001 - not cached: fall through to the hub
                log.debug("tokenizer %s not in the local cache; trying the hub", name)
        return AutoTokenizer.from_pretrained(str(local) if path_like else name)
    except Exception as e:  # noqa: BLE001 - transformers raises OSError/ValueError/HTTP errors
        lines = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
        raise ModelLoadError(f"cannot load tokenizer {name!r} ({reason}); {hint}") from e


__all__ = ["ENV_HINT", "load_tokenizer"]

"""`atropos-serve-model --model DIR`: serve a local transformers model over an OpenAI-compatible HTTP API.

See docs/inference.md. The flags are ``EngineConfig``'s fields (``atroposlib.utils.settings_cli``);
a bad value or model directory prints one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from pydantic import ValidationError

from atroposlib.errors import AtroposError
from atroposlib.inference.config import EngineConfig
from atroposlib.utils.settings_cli import (
    Flag,
    add_model_arguments,
    format_validation_error,
    model_values,
)

# Where the flags differ from the generated ``--field-name``: the model directory is ``--model``.
FLAGS = {"model_path": Flag("--model")}


def build_parser() -> argparse.ArgumentParser:
    """One flag per ``EngineConfig`` field (help: its description and default), plus
    ``--no-batching``."""
    p = argparse.ArgumentParser(
        prog="atropos-serve-model",
        description="Serve a local transformers causal LM with batched CPU generation "
        "(OpenAI-compatible /v1/completions and /v1/chat/completions).",
    )
    add_model_arguments(p, EngineConfig, flags=FLAGS, require=True)
    p.add_argument(
        "--no-batching",
        action="store_true",
        help="one request row at a time (baseline): --max-batch-size 1 --batch-window-ms 0",
    )
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    values = model_values(args, EngineConfig)
    if args.no_batching:
        values.update(max_batch_size=1, batch_window_ms=0.0)
    try:
        config = EngineConfig(**values)
    except ValidationError as e:
        line = format_validation_error(e, EngineConfig, lead="", flags=FLAGS, as_flags=True)
        print(f"atropos-serve-model: error: {line}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        from pathlib import Path

        from atroposlib.inference.loading import check_model_dir

        check_model_dir(Path(config.model_path).expanduser())  # fail fast, before torch is imported
        from atroposlib.inference.server import create_app

        app = create_app(config)
    except AtroposError as e:
        print(f"atropos-serve-model: error: {e}", file=sys.stderr)
        return 2
    import uvicorn

    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level.lower())
    return 0


if __name__ == "__main__":
    sys.exit(main())

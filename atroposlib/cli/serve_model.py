"""`atropos-serve-model --model DIR`: serve a local transformers model over an OpenAI-compatible HTTP API.

See docs/inference.md. The flags are ``EngineConfig``'s fields (``atroposlib.utils.settings_cli``);
a bad value, a bad model directory or a port that is taken prints one line and exits with status 2.
The port is bound before the model is loaded, and the server takes over that socket. The API key
comes from ``ATROPOS_ENGINE_API_KEY`` (or ``--api-key``, which shows in ``ps``); without one, a
non-loopback ``--host`` gets a warning, as run-api gives.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from atroposlib.errors import AtroposError
from atroposlib.inference.config import API_KEY_ENV, EngineConfig
from atroposlib.utils.cli import CliParser, fail
from atroposlib.utils.net import cannot_listen, is_loopback_host, listening_socket
from atroposlib.utils.progress import quiet_library_bars
from atroposlib.utils.settings_cli import (
    Flag,
    add_model_arguments,
    format_validation_error,
    model_values,
)

PROG = "atropos-serve-model"
# Where the flags differ from the generated ``--field-name``: the model directory is ``--model``.
FLAGS = {"model_path": Flag("--model")}


def build_parser() -> argparse.ArgumentParser:
    """One flag per ``EngineConfig`` field (help: its description and default), plus
    ``--no-batching``."""
    p = CliParser(
        prog=PROG,
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


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The configuration the flags give (``ATROPOS_ENGINE_API_KEY`` when ``--api-key`` is absent);
    raises ``ValidationError``."""
    values = model_values(args, EngineConfig)
    if args.no_batching:
        values.update(max_batch_size=1, batch_window_ms=0.0)
    if "api_key" not in values and os.environ.get(API_KEY_ENV):
        values["api_key"] = os.environ[API_KEY_ENV]
    return EngineConfig(**values)


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = engine_config(args)
    except ValidationError as e:
        return fail(
            PROG, format_validation_error(e, EngineConfig, lead="", flags=FLAGS, as_flags=True)
        )
    if not config.api_key and not is_loopback_host(config.host):
        print(
            f"{PROG}: warning: listening on {config.host} without --api-key: anyone who can reach "
            f"this port can load weights from any local folder into it (set {API_KEY_ENV})",
            file=sys.stderr,
            flush=True,
        )
    level = "DEBUG" if config.log_level == "trace" else config.log_level.upper()  # trace: uvicorn's
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_library_bars()  # no "Loading weights" bar in a log file
    try:
        from atroposlib.inference.loading import check_model_dir

        check_model_dir(Path(config.model_path).expanduser())  # fail fast, before torch is imported
    except AtroposError as e:
        return fail(PROG, e)
    try:  # bind before loading the model: a busy port is one line, not a late uvicorn error
        sock = listening_socket(config.host, config.port)
    except OSError as e:
        return fail(PROG, cannot_listen(config.host, config.port, e))
    try:
        from atroposlib.inference.server import create_app

        app = create_app(config)
    except AtroposError as e:
        sock.close()
        return fail(PROG, e)
    import uvicorn

    # The model is loaded and the port taken: connections wait in the listen queue until uvicorn
    # accepts them. uvicorn logs no "running on" line for a socket it is given; this is that line.
    sock.listen(2048)
    port = sock.getsockname()[1]  # --port 0: the port the system picked
    print(f"{PROG}: serving {config.model_path} on http://{config.host}:{port}", flush=True)

    server = uvicorn.Config(
        app,
        host=config.host,
        port=port,
        log_level=config.log_level.lower(),
        access_log=config.access_log,
    )
    try:
        uvicorn.Server(server).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then re-raised the Ctrl-C
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

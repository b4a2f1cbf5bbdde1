"""``run-api``: start the trajectory API server (also ``python -m atroposlib.cli.run_api``).

Flags override ``ATROPOS_*`` environment variables, which override defaults (see ApiSettings).
On a data directory that holds an earlier run, the same command resumes it when it still holds
undelivered groups and starts a new run when nothing is left to deliver; ``--resume`` / ``--fresh``
(or ``ATROPOS_START_MODE``) force either (see ``api/run_identity``). The first line printed names
the data directory by its absolute path and says which it did.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional

from atroposlib.api.run_identity import START_MODES, start_decision
from atroposlib.api.settings import ENV_PREFIX, ApiSettings
from atroposlib.errors import AtroposError
from atroposlib.utils.net import is_loopback_host, listening_socket
from atroposlib.utils.settings_cli import Flag, add_model_arguments, model_values

# Where run-api's flags differ from the generated ``--field-name``: one ``--cors-origin`` per origin.
FLAGS = {"cors_origins": Flag("--cors-origin", repeat=True)}


def build_parser() -> argparse.ArgumentParser:
    """One flag per ``ApiSettings`` field (help: its description, environment variable and
    default), plus ``--resume`` / ``--fresh``."""
    p = argparse.ArgumentParser(
        prog="run-api", description="Atropos-compatible durable trajectory API."
    )
    add_model_arguments(p, ApiSettings, flags=FLAGS, env_prefix=ENV_PREFIX)
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--resume",
        dest="start_mode",
        action="store_const",
        const="resume",
        help="always continue the run held in the data directory, even one with nothing left to "
        "deliver (its registration, step and envs); default: resume only a run that still holds "
        "undelivered groups, else start a new one",
    )
    start.add_argument(
        "--fresh",
        dest="start_mode",
        action="store_const",
        const="fresh",
        help="always discard the run held in the data directory, undelivered groups included, "
        "and start a new one",
    )
    p.set_defaults(start_mode=None)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    start_mode = args.start_mode or os.environ.get("ATROPOS_START_MODE") or None
    if start_mode not in (None, *START_MODES):
        print(
            f"run-api: error: ATROPOS_START_MODE must be resume or fresh, not {start_mode!r}",
            file=sys.stderr,
        )
        return 2
    try:
        settings = ApiSettings.from_env(**model_values(args, ApiSettings))
    except AtroposError as e:
        print(f"run-api: error: {e}", file=sys.stderr)
        return 2
    # bind first: a busy port is one line before the data directory is touched (a start-up may
    # discard a drained run) and before anything claims to be serving
    try:
        sock = listening_socket(settings.host, settings.port)
    except OSError as e:
        print(
            f"run-api: error: cannot listen on {settings.host}:{settings.port} ({e.strerror or e}); "
            "is another server using it? pick another --port",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from atroposlib.api.allocator import keep_freed_memory
        from atroposlib.api.app import create_app

        logging.basicConfig(  # trace is uvicorn's level; Python's logging goes down to DEBUG
            level="DEBUG" if settings.log_level == "trace" else settings.log_level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        keep_freed_memory()  # reuse freed MB-sized buffers instead of faulting in fresh pages
        app = create_app(settings)
        data_dir = os.path.abspath(settings.data_dir)  # the default is relative to the cwd
        where = data_dir if settings.store == "sqlite" else "the memory store"
        start_line = start_decision(app.state.service, start_mode, where)
    except (AtroposError, ValueError) as e:
        sock.close()
        print(f"run-api: error: {e}", file=sys.stderr)
        return 2
    if not settings.api_token and not is_loopback_host(settings.host):
        print(
            f"run-api: warning: listening on {settings.host} without --api-token: anyone who can "
            "reach this port can read and reset the run (set ATROPOS_API_TOKEN)",
            file=sys.stderr,
            flush=True,
        )
    print(f"run-api: {start_line}", flush=True)
    print(
        f"run-api: serving on http://{settings.host}:{settings.port} "
        f"(store={settings.store}{', data_dir=' + data_dir if settings.store == 'sqlite' else ''}, "
        f"auth={'on' if settings.api_token else 'off'})",
        flush=True,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        # "auto" picks httptools/uvloop (the uvicorn[standard] extras, a dependency) when installed.
        http="auto",
        loop="auto",
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())

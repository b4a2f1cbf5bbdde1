"""``run-api``: start the trajectory API server (also ``python -m atroposlib.cli.run_api``).

Flags override ``ATROPOS_*`` environment variables, which override defaults (see ApiSettings).
A data directory that holds an earlier run needs ``--resume`` or ``--fresh`` (or
``ATROPOS_START_MODE``); see ``api/run_identity``.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import Optional

from atroposlib.api.run_identity import START_MODES, start_decision
from atroposlib.errors import AtroposError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run-api", description="Atropos-compatible durable trajectory API."
    )
    p.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="TCP port (default 8000)")
    p.add_argument(
        "--data-dir", default=None, help="directory of the SQLite store (env ATROPOS_DATA_DIR)"
    )
    p.add_argument(
        "--store", choices=["sqlite", "memory"], default=None, help="store kind (default sqlite)"
    )
    p.add_argument(
        "--sqlite-synchronous",
        choices=["NORMAL", "FULL"],
        default=None,
        help="NORMAL survives process crashes, FULL also power loss (slower)",
    )
    p.add_argument(
        "--api-token", default=None, help="bearer token required by clients (env ATROPOS_API_TOKEN)"
    )
    p.add_argument(
        "--max-queued-sequences", type=int, default=None, help="backpressure bound (503 beyond)"
    )
    p.add_argument(
        "--max-queued-bytes",
        type=int,
        default=None,
        help="backpressure bound on queued payload bytes (503 beyond; default 4 GiB)",
    )
    p.add_argument(
        "--retry-after-seconds", type=float, default=None, help="Retry-After sent with 503"
    )
    p.add_argument(
        "--max-staleness",
        type=int,
        default=None,
        help="drop groups whose policy_version < current_step - S at batch formation",
    )
    p.add_argument(
        "--max-body-bytes", type=int, default=None, help="largest request body (413 beyond)"
    )
    p.add_argument(
        "--max-decompressed-bytes", type=int, default=None, help="largest gunzipped body (413)"
    )
    p.add_argument(
        "--offload-min-bytes",
        type=int,
        default=None,
        help="parse bodies at least this large in a child process (default 8 MiB)",
    )
    p.add_argument(
        "--gzip-min-bytes", type=int, default=None, help="gzip responses at least this large"
    )
    p.add_argument(
        "--gzip-level", type=int, default=None, help="gzip level of responses, 1-9 (default 1)"
    )
    p.add_argument(
        "--dedup-window",
        type=int,
        default=None,
        help="group_ids remembered for idempotency; older acked rows are deleted (default 100000)",
    )
    p.add_argument(
        "--history-size", type=int, default=None, help="delivered groups kept for GET /peek"
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        default=None,
        help="allowed CORS origin (repeatable); none by default",
    )
    p.add_argument("--log-level", default=None, help="debug, info, warning, error")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--resume",
        dest="start_mode",
        action="store_const",
        const="resume",
        help="continue the run held in the data directory (crash recovery)",
    )
    start.add_argument(
        "--fresh",
        dest="start_mode",
        action="store_const",
        const="fresh",
        help="discard the run held in the data directory and start a new one",
    )
    p.set_defaults(start_mode=None)
    return p


def _is_loopback_host(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    start_mode = args.start_mode or os.environ.get("ATROPOS_START_MODE") or None
    del args.start_mode
    if start_mode not in (None, *START_MODES):
        print(
            f"run-api: error: ATROPOS_START_MODE must be resume or fresh, not {start_mode!r}",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from atroposlib.api.allocator import keep_freed_memory
        from atroposlib.api.app import create_app
        from atroposlib.api.settings import ApiSettings

        settings = ApiSettings.from_env(**vars(args))
        logging.basicConfig(
            level=settings.log_level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        keep_freed_memory()  # reuse freed MB-sized buffers instead of faulting in fresh pages
        app = create_app(settings)
        where = str(settings.data_dir) if settings.store == "sqlite" else "the memory store"
        start_line = start_decision(app.state.service, start_mode, where)
    except (AtroposError, ValueError) as e:
        print(f"run-api: error: {e}", file=sys.stderr)
        return 2
    try:  # bind before saying "serving on": a busy port is an error, not a late traceback
        sock = listening_socket(settings.host, settings.port)
    except OSError as e:
        print(
            f"run-api: error: cannot listen on {settings.host}:{settings.port} ({e.strerror or e}); "
            "is another server using it? pick another --port",
            file=sys.stderr,
        )
        return 2
    if not settings.api_token and not _is_loopback_host(settings.host):
        print(
            f"run-api: warning: listening on {settings.host} without --api-token: anyone who can "
            "reach this port can read and reset the run",
            file=sys.stderr,
            flush=True,
        )
    print(f"run-api: {start_line}", flush=True)
    print(
        f"run-api: serving on http://{settings.host}:{settings.port} "
        f"(store={settings.store}{', data_dir=' + str(settings.data_dir) if settings.store == 'sqlite' else ''}, "
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


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``OSError`` when the address is taken or invalid)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


if __name__ == "__main__":
    sys.exit(main())

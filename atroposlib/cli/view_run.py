"""``view-run``: browse a run's recent groups in the browser, read-only (see docs/tools.md).

Reads a live trajectory API through ``GET /peek`` (never consumes, registers or resets) or a groups
JSONL file written by ``serve``/``process``. An API that does not answer at start is one line and
exit status 1. Serves on 127.0.0.1 unless ``--host`` says otherwise; a public Gradio share link only
with ``--share``. A bad ``--api-url`` or a port that is taken is one
line and exit status 2, checked before anything is read or started; the one "serving on" line is
printed once Gradio listens (Gradio's own start-up lines are silenced).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from typing import Optional

from atroposlib.errors import APIUnavailable, AtroposError
from atroposlib.utils.cli import CliParser, fail, non_negative_float, port_number
from atroposlib.utils.net import listen_problem
from atroposlib.utils.urls import base_url_error

PROG = "view-run"
DEFAULT_API_URL = "http://localhost:8000"


def build_parser() -> argparse.ArgumentParser:
    p = CliParser(
        prog=PROG,
        description="Browse a run's scored groups (read-only): from a trajectory API or a groups JSONL file.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--api-url",
        default=None,
        help=f"Trajectory API to read with GET /peek (default {DEFAULT_API_URL}).",
    )
    src.add_argument("--file", default=None, help="Groups JSONL file written by serve/process.")
    src.add_argument(
        "--demo", action="store_true", help="Show built-in example groups (no API, no file)."
    )
    p.add_argument(
        "--api-token", default=None, help="Bearer token of the API (or env ATROPOS_API_TOKEN)."
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="Interface to serve on (default: local only)."
    )
    p.add_argument("--port", type=port_number, default=7860, help="Port to serve on.")
    p.add_argument(
        "--share",
        action="store_true",
        help="Also open a public Gradio share link (off by default).",
    )
    p.add_argument(
        "--tokenizer", default=None, help="Tokenizer dir or hub id, to show tokens as text."
    )
    p.add_argument(
        "--refresh-seconds",
        type=non_negative_float,
        default=0.0,
        help="Refresh automatically every this many seconds (0: only with the button).",
    )
    p.add_argument("--title", default="Atropos run viewer", help="Page title.")
    return p


class _DemoSource:
    description = "built-in example groups"

    def __init__(self) -> None:
        from atroposlib.viewer.samples import sample_groups

        self.groups = sample_groups()
        for i, g in enumerate(self.groups):
            g["seq"] = i

    def fetch(self, limit: int, env: Optional[str] = None):
        return self.groups[-limit:]

    def status_line(self) -> str:
        return f"{len(self.groups)} groups"


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.api_url is not None:
        problem = base_url_error(args.api_url, "--api-url")
        if problem:
            return fail(PROG, problem)
    busy = listen_problem(args.host, args.port)  # before reading anything or starting Gradio
    if busy:
        return fail(PROG, busy)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from atroposlib.report.tokenizer import make_decoder, make_token_text, optional_tokenizer
    from atroposlib.viewer.app import VIEW_CSS, ViewerState, build_app, launch_theme
    from atroposlib.viewer.sources import ApiSource, FileSource

    api_url = (args.api_url or DEFAULT_API_URL).strip()
    try:
        tok = optional_tokenizer(args.tokenizer)
        if args.file:
            source = FileSource(args.file)
        elif args.demo:
            source = _DemoSource()
        else:
            token = args.api_token or os.environ.get("ATROPOS_API_TOKEN")
            source = ApiSource(api_url, token=token)
            source.status_line()  # an API that is not there: say so now, not in a page
    except APIUnavailable as e:
        return fail(
            PROG,
            f"cannot reach the trajectory API at {api_url} ({e}); is run-api running? "
            "check --api-url, or read a groups file with --file",
            1,
        )
    except (AtroposError, OSError) as e:
        return fail(PROG, e)
    decode = make_decoder(tok) if tok is not None else None
    token_text = make_token_text(tok) if tok is not None else None
    if args.demo and tok is None:  # the example groups are tokenized as UTF-8 bytes
        decode = lambda ids: bytes(ids).decode("utf-8", "replace")  # noqa: E731
        token_text = lambda t: bytes([t]).decode("utf-8", "replace") if t < 256 else f"[{t}]"  # noqa: E731
    state = ViewerState(source, decode=decode, token_text=token_text)
    demo = build_app(state, title=args.title, refresh_seconds=args.refresh_seconds)
    try:
        demo.launch(
            server_name=args.host,
            server_port=args.port,
            share=args.share,
            inbrowser=False,
            css=VIEW_CSS,
            theme=launch_theme(),
            footer_links=[],
            show_error=True,
            quiet=True,  # our own line says where it serves; no "set share=True" hint
            prevent_thread_lock=True,
        )
    except OSError:  # taken between the check above and Gradio's own bind
        return fail(
            PROG,
            f"cannot listen on {args.host}:{args.port}; is another server using it? "
            "pick another --port",
        )
    print(
        f"view-run: reading {source.description}; serving on http://{args.host}:{args.port}",
        flush=True,
    )
    # Ctrl-C stops the viewer even when it was started with SIGINT ignored (a background job of a
    # non-interactive shell, as some CI runners start their commands): run-api and the inference server
    # stop on it there too, since uvicorn installs its own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while demo.is_running:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a viewer is stopped
    finally:
        demo.close(verbose=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

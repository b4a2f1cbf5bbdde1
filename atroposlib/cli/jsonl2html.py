"""``atropos-jsonl2html IN.jsonl [-o OUT.html]``: a self-contained, escaped HTML report of a groups file.

Parses the flags and calls ``atroposlib.frontend.jsonl2html.generate_html``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.frontend.jsonl2html import default_output_path, generate_html
from atroposlib.report.groups import LoadStats
from atroposlib.utils.cli import fail

PROG = "atropos-jsonl2html"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Render a JSONL file of scored groups (written by `serve`/`process`) as one HTML page.",
    )
    p.add_argument("input", help="JSONL file, one scored group per line.")
    p.add_argument("-o", "--output", help="Output HTML file (default: the input path with .html).")
    p.add_argument("--title", help="Page title (default: the input file name).")
    p.add_argument(
        "--tokenizer", help="Tokenizer dir or hub id, to decode groups that have no messages."
    )
    p.add_argument(
        "--token-view", action="store_true", help="Add a per-token view (mask/logprob colours)."
    )
    p.add_argument("--max-groups", type=int, default=None, help="Render at most this many groups.")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    src = Path(args.input)
    out = Path(args.output) if args.output else default_output_path(args.input)
    if not src.is_file():
        return fail(PROG, f"input file not found: {src}")
    if out.resolve() == src.resolve():
        return fail(PROG, "output would overwrite the input")
    stats = LoadStats()
    try:
        path = generate_html(
            args.input,
            str(out),
            title=args.title,
            tokenizer=args.tokenizer,
            token_view=args.token_view,
            max_groups=args.max_groups,
            stats=stats,
        )
    except (AtroposError, OSError) as e:
        return fail(PROG, e, 1)
    skipped = sum(stats.skipped.values())
    note = (
        f", {skipped} lines skipped ({', '.join(f'{k}: {v}' for k, v in stats.skipped.items())})"
        if skipped
        else ""
    )
    print(f"wrote {path} ({stats.groups} groups{note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

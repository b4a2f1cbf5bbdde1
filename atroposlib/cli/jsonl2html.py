"""``atropos-jsonl2html IN.jsonl [-o OUT.html]``: a self-contained, escaped HTML report of a groups file.

Parses the flags and calls ``atroposlib.frontend.jsonl2html.generate_html``. The page is written to a
temporary file and moved into place only when the input held at least one readable group; otherwise
nothing is written (an existing output stays as it was) and the command exits 1 with one line.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.frontend.jsonl2html import default_output_path, generate_html
from atroposlib.report.groups import LoadStats
from atroposlib.utils.cli import FAILED, CliParser, fail, positive_int

PROG = "atropos-jsonl2html"


def build_parser() -> argparse.ArgumentParser:
    p = CliParser(
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
    p.add_argument(
        "--max-groups", type=positive_int, default=None, help="Render at most this many groups."
    )
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    src = Path(args.input)
    out = Path(args.output) if args.output else default_output_path(args.input)
    if not src.is_file():
        return fail(PROG, f"input file not found: {src}")
    if out.resolve() == src.resolve():
        return fail(PROG, "output would overwrite the input")
    stats = LoadStats()
    warnings = _HeldWarnings()
    logging.getLogger().addHandler(warnings)  # the only handler: warnings wait for the outcome
    try:
        with tempfile.TemporaryDirectory(prefix="jsonl2html-") as tmp:
            page = Path(tmp) / out.name
            generate_html(
                args.input,
                str(page),
                title=args.title,
                tokenizer=args.tokenizer,
                token_view=args.token_view,
                max_groups=args.max_groups,
                stats=stats,
            )
            if stats.groups == 0:
                warnings.show(but=_SKIPPED_LINES)  # the error line counts the skipped lines
                why = _skips(stats) if stats.lines else " (the file has no lines)"
                return fail(PROG, f"no readable group in {src}{why}; nothing written", FAILED)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(page), str(out))
    except (AtroposError, OSError) as e:
        return fail(PROG, e, FAILED)
    finally:
        logging.getLogger().removeHandler(warnings)
    warnings.show()
    print(f"wrote {out} ({stats.groups} groups{_skips(stats)})")
    return 0


def _skips(stats: LoadStats) -> str:
    skipped = sum(stats.skipped.values())
    if not skipped:
        return ""
    return f", {skipped} lines skipped ({', '.join(f'{k}: {v}' for k, v in stats.skipped.items())})"


_SKIPPED_LINES = "atroposlib.report.groups"  # the logger that names each skipped line


class _HeldWarnings(logging.Handler):
    """Holds the warnings while the page is written: all are shown once a page is written; the
    skipped-line ones are left out when the one error line already counts them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def show(self, but: Optional[str] = None) -> None:
        for record in self.records:
            if record.name != but:
                print(self.format(record), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

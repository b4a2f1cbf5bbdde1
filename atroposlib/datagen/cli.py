"""Shared command line of ``atropos-sft-gen`` and ``atropos-dpo-gen`` (Atropos's flags, plus ours).

Ours: ``--input FILE`` (offline, from a groups JSONL), ``--keep-roles`` (message roles written with
``--save-messages``), ``--api-token``, ``--consume`` (alias
``--as-trainer``: pull batches even though a trainer is registered), ``--reset`` (the only way these
tools reset the API), ``--idle-timeout``, ``--summary-json`` and ``--no-progress``. User mistakes end
with a one-line message and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from functools import partial
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from atroposlib.datagen.export import (
    ApiFeed,
    ApiFeedConfig,
    JsonlFeed,
    TrainerAlreadyRegistered,
    open_output,
    run_datagen,
)
from atroposlib.datagen.selection import (
    CHAT_TEMPLATE_ROLES,
    DpoOptions,
    SftOptions,
    select_dpo,
    select_sft,
)
from atroposlib.errors import APIError, APIUnavailable, AtroposError
from atroposlib.report.tokenizer import load_tokenizer, make_decoder
from atroposlib.utils.cli import (
    USAGE_ERROR,
    CliParser,
    fail,
    non_negative_float,
    positive_float,
    positive_int,
)
from atroposlib.utils.settings_cli import format_validation_error
from atroposlib.utils.urls import base_url_error

DEFAULT_TOKENIZER = "NousResearch/DeepHermes-3-Llama-3-8B-Preview"
"""Atropos's default ``--tokenizer`` (a hub id): not ours; records are messages without one."""
# The selection settings of each generator; their flags take default and help from these models.
OPTIONS: dict[str, type[SftOptions] | type[DpoOptions]] = {"sft": SftOptions, "dpo": DpoOptions}


def build_parser(kind: str) -> argparse.ArgumentParser:
    """The parser of ``atropos-{kind}-gen`` (kind is 'sft' or 'dpo')."""
    what = "SFT examples" if kind == "sft" else "DPO chosen/rejected pairs"
    p = CliParser(
        prog=f"atropos-{kind}-gen",
        description=f"Write {what} as JSONL from a trajectory API (as its trainer) or from a groups file.",
    )
    p.add_argument("filepath", help=f"Output JSONL file for the {what}.")
    _source_flags(p.add_argument_group("source"), kind)
    _selection_flags(p.add_argument_group("selection"), kind)
    _output_flags(p.add_argument_group("output"))
    return p


def _source_flags(src: argparse._ArgumentGroup, kind: str) -> None:
    """Where groups come from: a file, or the trajectory API joined as its trainer."""
    src.add_argument(
        "--input",
        metavar="GROUPS.jsonl",
        help="Read groups from this JSONL file (offline) instead of the API.",
    )
    src.add_argument(
        "--api-url", default="http://localhost:8000", help="Base URL of the trajectory API."
    )
    src.add_argument(
        "--api-token", default=None, help="Bearer token of the API (or env ATROPOS_API_TOKEN)."
    )
    src.add_argument(
        "--consume",
        "--as-trainer",
        dest="consume",
        action="store_true",
        help="Pull batches even though a trainer is already registered (only when it is not running).",
    )
    src.add_argument(
        "--reset",
        action="store_true",
        help="Reset the API (wipes its queue and registration) before registering. Never done otherwise.",
    )
    src.add_argument(
        "--group-size",
        type=positive_int,
        default=2,
        help="Sequences per group (for the batch size).",
    )
    src.add_argument(
        "--max-token-len",
        type=positive_int,
        default=2048,
        help="Longest sequence: registered with the API; longer sequences are dropped.",
    )
    src.add_argument(
        "--tasks-per-step",
        type=positive_int,
        default=64 if kind == "sft" else 8,
        help="Groups per batch when registering (batch_size = group_size * tasks_per_step).",
    )
    src.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=None,
        help="Stop after this many seconds without a batch (default: wait forever).",
    )
    src.add_argument(
        "--wait-for-api",
        type=non_negative_float,
        default=60.0,
        metavar="S",
        help="How long an API that does not answer yet (e.g. just started) is waited for.",
    )
    src.add_argument(
        "--poll-interval",
        type=positive_float,
        default=1.0,
        help="Seconds between empty /batch polls.",
    )


def _selection_flags(sel: argparse._ArgumentGroup, kind: str) -> None:
    """What is written of each group: the generator's selection options and the record format."""
    sel.add_argument(
        "--tokenizer",
        default=None,
        help="Tokenizer dir or hub id of the model that generated the groups: records are then "
        "prefix/completion text decoded from their tokens. Without it (no hub default), records "
        "are the groups' messages, as with --save-messages.",
    )
    option = partial(_option_flag, sel, OPTIONS[kind])
    option("save_messages", action="store_true")
    sel.add_argument(
        "--keep-roles",
        default=",".join(CHAT_TEMPLATE_ROLES),
        metavar="ROLE,...",
        help="With --save-messages: only messages with these roles are written (others, such as "
        "an env's 'grader' notes, are left out and counted). Default: %(default)s.",
    )
    option("save_top_n_per_group" if kind == "sft" else "save_n_pairs_per_group", type=int)
    sel.add_argument(
        "--num-seqs-to-save",
        type=positive_int,
        default=100,
        help="Stop after writing this many records.",
    )
    option("allow_negative_scores", action="store_true")
    option("minimum_score_diff_max_min", type=float)


def _output_flags(out: argparse._ArgumentGroup) -> None:
    out.add_argument(
        "--append-to-previous", action="store_true", help="Append to an existing output file."
    )
    out.add_argument("--summary-json", metavar="FILE", help="Also write the summary as JSON here.")
    out.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")
    out.add_argument(
        "--dry-run",
        action="store_true",
        help="Check the tokenizer, the input or the API (read-only) and exit; writes nothing.",
    )


def count_lines(path: str) -> int:
    """Non-empty lines of ``path`` (the groups a JSONL file holds, for progress)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _option_flag(
    group: argparse._ArgumentGroup, options: type[BaseModel], name: str, **kwargs: Any
) -> None:
    """Add ``--name`` for the selection option ``name``: default and help from ``options``."""
    spec = options.model_fields[name]
    group.add_argument(
        "--" + name.replace("_", "-"), default=spec.default, help=spec.description, **kwargs
    )


def _dry_run(prog: str, args: argparse.Namespace) -> int:
    """Check what a real run needs without registering, pulling, resetting or writing."""
    import os

    if not args.save_messages:
        load_tokenizer(args.tokenizer)
        print(f"{prog}: tokenizer {args.tokenizer!r} loads")
    else:
        print(f"{prog}: message records (no tokenizer needed)")
    if Path(args.filepath).exists() and not args.append_to_previous:
        print(f"{prog}: note: {args.filepath} exists; a real run needs --append-to-previous")
    if args.input:
        feed = JsonlFeed(args.input)
        n = sum(1 for _ in feed.batches())
        print(
            f"{prog}: {args.input}: {n} groups readable, {sum(feed.stats.skipped.values())} lines unreadable"
        )
        return 0
    from atroposlib.api.client import TrajectoryClient

    with TrajectoryClient(
        args.api_url,
        token=args.api_token or os.environ.get("ATROPOS_API_TOKEN"),
        retries=2,
        retry_max_seconds=10.0,
    ) as c:
        c.health()
        info, st = c.info(), c.status()
    trainer = (
        f"a trainer is registered (batch_size={info.batch_size})"
        if info.batch_size > 0
        else "no trainer registered"
    )
    print(
        f"{prog}: {args.api_url} reachable: {trainer}, step {st.current_step}, {st.queue_size} groups queued"
    )
    if info.batch_size > 0 and not args.consume:
        print(f"{prog}: a real run would refuse without --consume (or --reset)")
    return 0


class _Refused(Exception):
    """A user mistake found while setting the run up: ``run`` reports it with ``fail`` and exits
    with ``code``."""

    def __init__(self, message: str, code: int = USAGE_ERROR) -> None:
        super().__init__(message)
        self.code = code


def _checked_options(prog: str, kind: str, args: argparse.Namespace) -> SftOptions | DpoOptions:
    """The selection options the flags give, after the checks that need nothing but the flags
    (``args.save_messages`` is turned on without ``--tokenizer``; ``args.api_url`` is stripped)."""
    if args.tokenizer is None and not args.save_messages:
        args.save_messages = True
        print(
            f"{prog}: no --tokenizer: writing the groups' messages (as --save-messages); give "
            "--tokenizer DIR (the generating model's) for prefix/completion text records",
            file=sys.stderr,
        )
    keep_roles = tuple(r.strip() for r in args.keep_roles.split(","))
    if not all(keep_roles):
        raise _Refused(f"--keep-roles needs comma-separated role names, got {args.keep_roles!r}")
    options = OPTIONS[kind]
    try:
        values = {name: getattr(args, name) for name in options.model_fields}
        opts = options(**{**values, "keep_roles": keep_roles})
    except ValidationError as e:  # names the flag of each bad option
        raise _Refused(format_validation_error(e, options, lead="", as_flags=True)) from None
    if not args.input:
        problem = base_url_error(args.api_url, "--api-url")
        if problem:
            raise _Refused(problem)
        args.api_url = args.api_url.strip()
    return opts


def _open_feed(args: argparse.Namespace) -> JsonlFeed | ApiFeed:
    """The groups' source: the ``--input`` file, or the API joined as its trainer."""
    import os

    if args.input:
        if args.reset or args.consume:
            raise _Refused("--reset/--consume apply to the API, not to --input files")
        feed = JsonlFeed(args.input)
        print(f"reading groups from {args.input}", file=sys.stderr)
        return feed
    api_feed = ApiFeed(
        ApiFeedConfig(
            api_url=args.api_url,
            api_token=args.api_token or os.environ.get("ATROPOS_API_TOKEN"),
            group_size=args.group_size,
            max_token_len=args.max_token_len,
            tasks_per_step=args.tasks_per_step,
            num_steps=args.num_seqs_to_save * 2,
            consume=args.consume,
            reset=args.reset,
            poll_interval=args.poll_interval,
            idle_timeout=args.idle_timeout,
            api_wait=args.wait_for_api,
        )
    )
    print(f"{args.api_url}: {api_feed.join()}", file=sys.stderr)
    return api_feed


def _selector(opts: SftOptions | DpoOptions, args: argparse.Namespace) -> Any:
    """The generator's selection of records from a group, decoding tokens unless messages are kept."""
    decode = None if args.save_messages else make_decoder(load_tokenizer(args.tokenizer))
    if isinstance(opts, SftOptions):
        return partial(select_sft, opts=opts, decode=decode)
    return partial(select_dpo, opts=opts, decode=decode)


def _report(
    prog: str,
    kind: str,
    args: argparse.Namespace,
    feed: JsonlFeed | ApiFeed,
    summary: Any,
    out_path: Path,
    mode: str,
) -> int:
    """The run's last lines (and ``--summary-json``); a file with no readable group is a failure
    that leaves no new, empty output file behind."""
    if args.input and summary.groups_read == 0:
        if mode == "w" and out_path.exists() and out_path.stat().st_size == 0:
            out_path.unlink()  # a new, empty file: leave nothing behind
        skipped = sum(feed.stats.skipped.values()) if isinstance(feed, JsonlFeed) else 0
        return fail(prog, f"{args.input}: no readable scored group ({skipped} lines unreadable)", 1)
    print(f"{prog}: wrote {out_path}")
    for line in summary.lines("pairs" if kind == "dpo" else "records"):
        print(line)
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return 0


def run(kind: str, argv: Optional[list[str]] = None) -> int:
    """Parse ``argv`` and run the generator; returns the exit status."""
    prog = f"atropos-{kind}-gen"
    args = build_parser(kind).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    feed: JsonlFeed | ApiFeed | None = None
    try:
        opts = _checked_options(prog, kind, args)
        if args.dry_run:
            return _dry_run(prog, args)
        out_path, mode = open_output(args.filepath, args.append_to_previous)
        select = _selector(opts, args)
        feed = _open_feed(args)
        summary = run_datagen(
            feed,
            select,
            out_path,
            mode,
            args.num_seqs_to_save,
            unit="seq" if kind == "sft" else "pair",
            desc=f"Grabbing {kind.upper()} data",
            progress=not args.no_progress,
            available=count_lines(args.input) if args.input else None,
        )
    except _Refused as e:
        return fail(prog, str(e), e.code)
    except KeyboardInterrupt:
        return fail(prog, "interrupted; records written so far are kept", 130)
    except TrainerAlreadyRegistered as e:
        return fail(prog, str(e), 3)
    except APIUnavailable as e:
        return fail(prog, f"cannot reach the API at {args.api_url}: {e}", 1)
    except APIError as e:
        return fail(prog, str(e), 1)
    except AtroposError as e:
        return fail(prog, str(e))
    except OSError as e:
        return fail(prog, str(e), 1)
    finally:
        if feed is not None:
            feed.close()
    return _report(prog, kind, args, feed, summary, out_path, mode)


__all__ = ["DEFAULT_TOKENIZER", "OPTIONS", "build_parser", "run"]

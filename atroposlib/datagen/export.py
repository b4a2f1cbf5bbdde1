"""The engine behind ``atropos-sft-gen`` and ``atropos-dpo-gen``: read groups, select, write JSONL.

Groups come from a feed: ``JsonlFeed`` (offline, a groups file) or ``ApiFeed`` (a trajectory API, as
its trainer). ``ApiFeed`` is safe to point at a live run: it refuses when a trainer is already
registered unless told to consume (``consume=True``), and resets the API only when asked
(``reset=True``). Each batch is acknowledged only after its records are written and flushed.
``run_datagen`` drives a feed through a selection function, shows a progress bar and returns a
``DatagenSummary`` (groups read, kept, sequences rejected by which rule, messages left out of the
written records by role, text records whose completion holds untrained text such as a tool's output).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from atroposlib.api.client import TrajectoryClient
from atroposlib.datagen.selection import RULE_TARGET_REACHED, Selection, has_untrained_inside
from atroposlib.errors import APIUnavailable, ConfigError, TrainerAlreadyRegistered
from atroposlib.report.groups import LoadStats, iter_groups_jsonl
from atroposlib.type_definitions import Registration
from atroposlib.utils.progress import Progress

log = logging.getLogger(__name__)

SelectFn = Callable[[dict[str, Any]], Selection]


@dataclass
class Batch:
    """Groups delivered together; ``batch_id`` is acknowledged once they are written."""

    groups: list[dict[str, Any]]
    batch_id: Optional[str] = None


class JsonlFeed:
    """Offline feed: the groups of a JSONL file in chunks (one fsync each). Nothing to acknowledge."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(f"--input file not found: {self.path}")
        self.stats = LoadStats()

    def batches(self, chunk: int = 256) -> Iterator[Batch]:
        buf: list[dict[str, Any]] = []
        for g in iter_groups_jsonl(self.path, self.stats):
            buf.append(g)
            if len(buf) >= chunk:
                yield Batch(buf)
                buf = []
        if buf:
            yield Batch(buf)

    def commit(self, batch: Batch) -> None:
        """Nothing to do for a file."""

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class ApiFeedConfig:
    """How ``ApiFeed`` joins a run."""

    api_url: str = "http://localhost:8000"
    api_token: Optional[str] = None
    group_size: int = 2
    max_token_len: int = 2048
    tasks_per_step: int = 64
    num_steps: int = 100
    consume: bool = False
    reset: bool = False
    poll_interval: float = 1.0
    idle_timeout: Optional[float] = (
        None  # stop after this many seconds without a batch (None: wait)
    )
    api_wait: float = 60.0  # how long an API that is not up yet (still starting) is waited for


class ApiFeed:
    """Pulls batches from a trajectory API as its trainer (``GET /batch`` + ``POST /batch/ack``)."""

    def __init__(self, cfg: ApiFeedConfig, client: Optional[TrajectoryClient] = None) -> None:
        self.cfg = cfg
        self.client = client or TrajectoryClient(
            cfg.api_url, token=cfg.api_token, retries=3, retry_max_seconds=20.0
        )
        self.registered_by_us = False
        self.idle_stopped = False

    def _wait_for_api(self) -> None:
        """``GET /health`` until it answers: an API started a moment ago (``run-api &``) is waited
        for up to ``api_wait`` seconds, said once; then ``APIUnavailable`` is the caller's."""
        deadline = time.monotonic() + self.cfg.api_wait
        said = False
        while True:
            try:
                self.client.health()
                return
            except APIUnavailable as e:
                if time.monotonic() >= deadline:
                    raise
                if not said:
                    log.warning(
                        "the API at %s does not answer yet (%s); waiting up to %.0fs (--wait-for-api)",
                        self.cfg.api_url,
                        e,
                        self.cfg.api_wait,
                    )
                    said = True
                time.sleep(1.0)

    def join(self) -> str:
        """Reset (only when asked), check for a trainer, register if none. Returns what was done."""
        c = self.client
        self._wait_for_api()
        done = []
        if self.cfg.reset:
            c.reset()
            done.append("reset the API (--reset)")
        info = c.info()
        has_trainer = info.batch_size is not None and info.batch_size > 0
        if has_trainer and not self.cfg.consume:
            raise TrainerAlreadyRegistered(
                f"the API at {self.cfg.api_url} already has a trainer registered "
                f"(batch_size={info.batch_size}); taking its batches would starve that trainer. "
                "Pass --consume to pull batches anyway (only when no trainer is running), "
                "--reset to start a fresh run (wipes its queue), or use --input FILE / view-run instead."
            )
        if has_trainer:
            done.append(f"consuming batches of the registered run (batch_size={info.batch_size})")
            return "; ".join(done)
        reg = Registration(
            wandb_group="atropos-datagen",
            wandb_project="atropos-datagen",
            batch_size=max(1, self.cfg.group_size * self.cfg.tasks_per_step),
            max_token_len=self.cfg.max_token_len,
            checkpoint_dir="",
            save_checkpoint_interval=0,
            starting_step=0,
            num_steps=max(1, self.cfg.num_steps),
        )
        c.register(reg)
        self.registered_by_us = True
        done.append(f"registered as the trainer (batch_size={reg.batch_size})")
        return "; ".join(done)

    def batches(self) -> Iterator[Batch]:
        idle_since = time.monotonic()
        while True:
            resp = self.client.get_batch()
            if resp.batch:
                idle_since = time.monotonic()
                yield Batch(list(resp.batch), resp.batch_id)
                continue
            if (
                self.cfg.idle_timeout is not None
                and time.monotonic() - idle_since > self.cfg.idle_timeout
            ):
                self.idle_stopped = True
                return
            time.sleep(self.cfg.poll_interval)

    def commit(self, batch: Batch) -> None:
        if batch.batch_id:
            self.client.ack_batch(batch.batch_id)

    def close(self) -> None:
        self.client.close()


@dataclass
class DatagenSummary:
    """What a run read, kept and dropped."""

    asked: int = 0  # --num-seqs-to-save
    unit: str = "seq"
    groups_read: int = 0
    groups_kept: int = 0
    records_written: int = 0
    sequences_read: int = 0
    rejected: Counter = field(default_factory=Counter)
    messages_dropped: Counter = field(default_factory=Counter)  # by role, in written records only
    bad_lines: dict[str, int] = field(default_factory=dict)
    stopped_because: str = ""
    untrained_in_completion: int = 0  # written text records whose completion holds masked text

    def as_dict(self) -> dict[str, Any]:
        return {
            "groups_read": self.groups_read,
            "groups_kept": self.groups_kept,
            "groups_rejected": self.groups_read - self.groups_kept,
            "records_written": self.records_written,
            "records_asked": self.asked,
            "sequences_read": self.sequences_read,
            "sequences_rejected_by_rule": {k: v for k, v in self.rejected.items() if v},
            "messages_dropped_by_role": {k: v for k, v in self.messages_dropped.items() if v},
            "records_with_untrained_text_in_completion": self.untrained_in_completion,
            "input_lines_skipped": dict(self.bad_lines),
            "stopped_because": self.stopped_because,
        }

    def lines(self, unit: str) -> list[str]:
        none = self.groups_read - self.groups_kept
        out = [
            f"groups read: {self.groups_read}; {self.groups_kept} gave records"
            + (f", {none} gave none (no sequence passed the rules below)" if none else ""),
            f"{unit} written: {self.records_written} of the {self.asked} asked for "
            f"(from {self.sequences_read} sequences)",
        ]
        for rule, n in self.rejected.most_common():
            if n:
                out.append(f"  dropped {n} sequences: {rule}")
        for role, n in self.messages_dropped.most_common():
            if n:
                out.append(f"  left out {n} messages with role {role!r} (not in --keep-roles)")
        if self.untrained_in_completion:
            out.append(
                f"  {self.untrained_in_completion} {unit} hold untrained text inside the completion "
                "(e.g. tool output): train on their segments (label false = not trained)"
            )
        for reason, n in self.bad_lines.items():
            out.append(f"  skipped {n} input lines: {reason}")
        if self.stopped_because:
            out.append(f"stopped: {self.stopped_because}")
        return out


def open_output(path: str | Path, append: bool) -> tuple[Path, str]:
    """Check the output path before anything else happens; returns (path, open mode)."""
    p = Path(path)
    if p.exists() and not append:
        raise ConfigError(f"output file {p} already exists; pass --append-to-previous to add to it")
    if p.exists() and p.is_dir():
        raise ConfigError(f"output path {p} is a directory")
    if not p.parent.exists():
        raise ConfigError(f"output directory {p.parent} does not exist")
    return p, ("a" if append and p.exists() else "w")


def run_datagen(
    feed: Any,
    select: SelectFn,
    out_path: str | Path,
    mode: str,
    num_to_save: int,
    *,
    unit: str = "seq",
    desc: str = "Grabbing data",
    progress: bool = True,
    available: Optional[int] = None,
) -> DatagenSummary:
    """Pull batches from ``feed``, select records, append them to ``out_path`` until ``num_to_save``
    records are written or the feed ends. Each batch is flushed to disk before ``feed.commit``.
    Progress counts groups read, against ``available`` when the source knows it (a file), with the
    records written beside it: a run that ends below ``num_to_save`` does not look cut short."""
    summary = DatagenSummary(asked=num_to_save, unit=unit)
    bar = Progress(available, desc, "groups", enabled=progress, logger=log)
    try:
        with open(out_path, mode, encoding="utf-8") as fh:
            for batch in feed.batches():
                for group in batch.groups:
                    n_seq = len(group.get("scores") or [])
                    summary.groups_read += 1
                    summary.sequences_read += n_seq
                    if summary.records_written >= num_to_save:
                        summary.rejected[RULE_TARGET_REACHED] += n_seq
                        continue
                    sel = select(group)
                    summary.rejected.update(sel.rejected)
                    room = num_to_save - summary.records_written
                    keep = sel.records[:room]
                    if len(sel.records) > room:
                        summary.rejected[RULE_TARGET_REACHED] += len(sel.records) - room
                    for rec in keep:
                        fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                        summary.untrained_in_completion += has_untrained_inside(rec)
                    for dropped in sel.roles_dropped[: len(keep)]:
                        summary.messages_dropped.update(dropped)
                    if keep:
                        summary.groups_kept += 1
                    summary.records_written += len(keep)
                    bar.set(
                        summary.groups_read,
                        written=f"{summary.records_written} {unit}s of {num_to_save} asked",
                    )
                fh.flush()
                os.fsync(fh.fileno())
                feed.commit(batch)
                if summary.records_written >= num_to_save:
                    summary.stopped_because = f"{num_to_save} {unit}s saved"
                    break
    finally:
        bar.close()
    if not summary.stopped_because:
        short = (
            f": {summary.records_written} of the {num_to_save} records asked for passed the rules"
            if summary.records_written < num_to_save
            else ""
        )
        if getattr(feed, "idle_stopped", False):
            summary.stopped_because = "no batch within --idle-timeout" + short
        else:
            summary.stopped_because = f"input exhausted (every group read){short}"
    stats = getattr(feed, "stats", None)
    if stats is not None:
        summary.bad_lines = dict(stats.skipped)
    return summary


__all__ = [
    "ApiFeed",
    "ApiFeedConfig",
    "Batch",
    "DatagenSummary",
    "JsonlFeed",
    "TrainerAlreadyRegistered",
    "open_output",
    "run_datagen",
]

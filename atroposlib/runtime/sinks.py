"""Where finished groups go: the ``GroupSink`` protocol, ``NullSink`` and the JSONL group file.

``serve`` puts groups into its on-disk spool (``spool.SpoolSink``); a bare env (a notebook, a
test) drops them into a ``NullSink``; ``data_path_to_save_groups`` also appends every group to a
``JsonlGroupWriter`` (what ``process`` writes and reports on).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, Union

import orjson

from atroposlib.type_definitions import ScoredDataGroup

logger = logging.getLogger(__name__)


class GroupSink(Protocol):
    """Takes one finished, validated group (``RunContext.group_sink``)."""

    async def put(self, group: ScoredDataGroup) -> None: ...


class NullSink:
    """Where groups go when nothing consumes them (e.g. a bare env in a notebook)."""

    def __init__(self) -> None:
        self.count = 0

    async def put(self, group: ScoredDataGroup) -> None:
        self.count += 1


class JsonlGroupWriter:
    """Appends one group per line and flushes it, so the file is valid after any interruption.
    An existing file is never overwritten: ``x.jsonl`` becomes ``x_1.jsonl`` (as Atropos does)."""

    def __init__(self, path: Union[str, Path], overwrite: bool = False) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        if not overwrite:
            original, counter = p, 1
            while p.exists():
                p = original.with_name(f"{original.stem}_{counter}{original.suffix}")
                counter += 1
            if p != original:
                logger.warning("%s exists; writing groups to %s instead", original, p)
        self.path = p
        self._f = open(p, "ab")
        self.count = 0

    def write(self, group: Mapping[str, Any]) -> None:
        self._f.write(orjson.dumps(group, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.count += 1

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


__all__ = ["GroupSink", "JsonlGroupWriter", "NullSink"]

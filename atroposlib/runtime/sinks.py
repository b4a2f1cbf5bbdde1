"""Where finished groups go: the ``GroupSink`` protocol, ``NullSink`` and the JSONL group file.

``serve`` puts groups into its on-disk spool (``spool.SpoolSink``); a bare env (a notebook, a
test) drops them into a ``NullSink``; ``data_path_to_save_groups`` also appends every group to a
``JsonlGroupWriter`` (what ``process`` writes and reports on). ``groups_path_problem`` says why a
value cannot be such a file, so the CLI refuses it before anything runs.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Optional, Protocol, Union

import orjson

from atroposlib.errors import ConfigError
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


def groups_path_problem(value: str) -> Optional[str]:
    """Why ``value`` cannot be the JSONL file groups are appended to, or None if it can: it must
    name a file (not a directory) whose folder exists or can be created by this user."""
    if not value.strip():
        return "it is empty; give a .jsonl file path"
    if value.endswith(("/", os.sep)) or Path(value).name in ("", ".", ".."):
        return f"{value!r} names a directory; give a file path such as {value.rstrip('/')}/groups.jsonl"
    folder = Path(value)
    try:
        path = Path(value).expanduser()
        if path.is_dir():
            return f"{value!r} is a directory; give a file path such as {value}/groups.jsonl"
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            return f"cannot create the folder of {value!r}: {str(folder)!r} is not a directory"
        with tempfile.TemporaryFile(dir=folder):  # can this user create files there?
            pass
    except ValueError as e:  # e.g. an embedded NUL byte
        return f"{value!r} is not a usable path ({e})"
    except OSError as e:
        return f"cannot write files under {str(folder)!r} ({e.strerror or e})"
    return None


class JsonlGroupWriter:
    """Appends one group per line and flushes it, so the file is valid after any interruption.
    An existing file is never overwritten: ``x.jsonl`` becomes ``x_1.jsonl`` (as Atropos does).
    The file (and its folder) is created by the first ``write``: a run that produces nothing
    leaves nothing behind, and the next run gets the name asked for."""

    def __init__(self, path: Union[str, Path], overwrite: bool = False) -> None:
        problem = groups_path_problem(str(path))
        if problem:
            raise ConfigError(f"data_path_to_save_groups: {problem}")
        self.overwrite = overwrite
        self.requested = Path(path).expanduser()
        self.path = self._free_name()
        self._f: Optional[IO[bytes]] = None
        self.count = 0

    def _free_name(self) -> Path:
        p = original = self.requested
        counter = 1
        while not self.overwrite and p.exists():
            p = original.with_name(f"{original.stem}_{counter}{original.suffix}")
            counter += 1
        return p

    def _open(self) -> IO[bytes]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                f = open(self.path, "ab" if self.overwrite else "xb")
                break
            except FileExistsError:  # created since this writer chose the name
                self.path = self._free_name()
        if self.path != self.requested:
            logger.warning("%s exists; writing groups to %s instead", self.requested, self.path)
        return f

    def write(self, group: Mapping[str, Any]) -> None:
        if self._f is None:
            self._f = self._open()
        self._f.write(orjson.dumps(group, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.count += 1

    def close(self) -> None:
        if self._f is not None and not self._f.closed:
            self._f.close()


__all__ = ["GroupSink", "JsonlGroupWriter", "NullSink", "groups_path_problem"]

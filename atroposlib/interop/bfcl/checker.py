"""The official BFCL checker, across a process boundary: ``BfclChecker`` starts the worker
(``atroposlib/interop/bfcl/worker.py``) once with the Python that has ``bfcl_eval`` and talks to it in JSON
lines (one request, one reply, in order; a lock keeps callers from different threads apart).

    with BfclChecker.start() as checker:
        entries = checker.load(["simple_python", "parallel"])
        verdicts = checker.check([Answer(entries["parallel"][0].id, text="[f(a=1)]")])

No checker environment is one ``ConfigError`` line naming what to install; a worker that dies is one
line with the end of its stderr. A request the worker refuses (an unknown category, an id not loaded)
raises ``ValueError`` with its one line; the worker goes on.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any, Optional

from atroposlib.errors import ConfigError
from atroposlib.interop.bfcl.entries import Answer, BfclEntry, Verdict
from atroposlib.interop.bfcl.locate import INSTALL_HINT, WORKER, bfcl_missing, find_bfcl_python

CHECK_CHUNK = 256
"""Answers per ``check`` request: one line each way stays a few hundred kB."""


class BfclChecker:
    """A running BFCL worker; ``close()`` (or the ``with`` block) ends it."""

    def __init__(self, python: str) -> None:
        # the worker's stderr, kept for the line that says why it stopped
        self._stderr_file = tempfile.TemporaryFile(prefix="bfcl-worker-")
        self._proc = subprocess.Popen(
            [python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            text=True,
            encoding="utf-8",
        )
        self._lock = threading.Lock()
        self._seq = 0
        self.version = ""
        self.categories: tuple[str, ...] = ()

    @classmethod
    def start(cls, python: Optional[str] = None) -> BfclChecker:
        """Start the worker (``python``: default ``find_bfcl_python()``) and greet it; ``ConfigError``
        with one line when there is no checker environment or it does not answer."""
        python = python or find_bfcl_python()
        if python is None:
            raise ConfigError(bfcl_missing() or "no BFCL checker")
        try:
            checker = cls(python)
        except OSError as exc:
            raise ConfigError(
                f"the BFCL checker's Python {python} does not start ({exc}); {INSTALL_HINT}"
            ) from None
        try:
            hello = checker._request({"op": "hello"})
        except (ConfigError, ValueError) as exc:
            checker.close()
            raise ConfigError(
                f"the BFCL checker at {python} does not run ({exc}); {INSTALL_HINT}"
            ) from None
        checker.version = str(hello.get("version", ""))
        checker.categories = tuple(hello.get("categories") or ())
        return checker

    def __enter__(self) -> BfclChecker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the worker (its stdin closes; it exits; killed after 10 s)."""
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                self._proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(10)
        for pipe in (self._proc.stdout,):
            if pipe is not None:
                pipe.close()
        self._stderr_file.close()

    def require_categories(self, categories: Iterable[str]) -> list[str]:
        """``categories`` as given; ``ValueError`` with one line listing the valid ones for any other."""
        chosen = list(categories)
        unknown = [c for c in chosen if c not in self.categories]
        if unknown or not chosen:
            raise ValueError(
                f"unknown BFCL categor{'ies' if len(unknown) > 1 else 'y'} "
                f"{', '.join(unknown) or '(none given)'}; valid: {', '.join(self.categories)}"
            )
        return chosen

    def load(self, categories: Iterable[str]) -> dict[str, list[BfclEntry]]:
        """The test entries of each category, in BFCL's order (the worker keeps them for ``check``)."""
        wanted = self.require_categories(categories)
        reply = self._request({"op": "load", "categories": wanted})
        out: dict[str, list[BfclEntry]] = {}
        for category, rows in reply["entries"].items():
            out[category] = [BfclEntry.from_worker(row) for row in rows]
        return out

    def compose(self, items: Sequence[tuple[str, Sequence[str], str]]) -> list[BfclEntry]:
        """New items made of loaded single-call entries (``(id, part ids, category)``; see the
        worker's ``compose``), kept by the worker for ``check``."""
        reply = self._request(
            {
                "op": "compose",
                "items": [{"id": i, "parts": list(p), "category": c} for i, p, c in items],
            }
        )
        return [BfclEntry.from_worker(row) for row in reply["entries"]]

    def add(self, items: Sequence[Mapping[str, Any]]) -> list[BfclEntry]:
        """Items made outside BFCL (``{"id", "category", "question", "functions", "ground_truth"}``:
        see the worker's ``add``), given BFCL's prompt and kept by the worker for ``check``."""
        reply = self._request({"op": "add", "items": [dict(i) for i in items]})
        return [BfclEntry.from_worker(row) for row in reply["entries"]]

    def check(self, answers: Sequence[Answer]) -> list[Verdict]:
        """The official verdict on each answer (same order), in requests of ``CHECK_CHUNK``."""
        verdicts: list[Verdict] = []
        for start in range(0, len(answers), CHECK_CHUNK):
            chunk = answers[start : start + CHECK_CHUNK]
            reply = self._request({"op": "check", "items": [a.request() for a in chunk]})
            verdicts += [Verdict.from_worker(row) for row in reply["results"]]
        return verdicts

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._seq += 1
            seq = self._seq
            line = json.dumps({**body, "seq": seq}) + "\n"
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(line)
                stdin.flush()
                answer = stdout.readline()
            except (BrokenPipeError, OSError):
                answer = ""
            if not answer:
                raise ConfigError(f"the BFCL worker stopped: {self._stderr_tail()}")
        reply = json.loads(answer)
        if reply.get("seq") != seq:
            raise ConfigError(f"the BFCL worker answered request {reply.get('seq')}, not {seq}")
        if not reply.get("ok"):
            raise ValueError(str(reply.get("error", "the BFCL worker refused the request")))
        return dict(reply)

    def _stderr_tail(self) -> str:
        self._proc.poll()
        handle: IO[bytes] = self._stderr_file
        handle.flush()
        handle.seek(0)
        lines = handle.read().decode(errors="replace").strip().splitlines()
        code = self._proc.returncode
        last = lines[-1] if lines else "no output"
        return f"{last} (exit {code})" if code is not None else last


__all__ = ["CHECK_CHUNK", "BfclChecker"]

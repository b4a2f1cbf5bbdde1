"""Which weights generated a completion, as the inference server reports it.

A *weights version* is the trainer step whose weights a server holds: the trainer labels each push
(``weight_version`` on our engine's and SGLang's ``/update_weights_from_disk``, vLLM's
``/update_weight_version``) and the server reports the label back. A completion's version is a
``Span`` ``(first, last)``: ``first < last`` when a refresh happened while it was generated (the
server kept the request across the refresh).

Where it comes from, best first:

* **stamped**: the answer carries it (our engine: every choice's ``weight_versions``, the spans over
  output tokens that vLLM's token-in/token-out ``/inference/v1/generate`` also answers; SGLang:
  ``meta_info.weight_version``);
* **bracketed**: the server can be asked its current version (vLLM dev mode ``GET /weight_info``,
  SGLang ``GET /model_info``, our engine ``GET /weight_info``): ``first`` is the newest version read
  before the request was sent (versions only grow, so it is a lower bound), ``last`` one read after
  the answer came (an upper bound). ``VersionProbe`` shares one read among concurrent requests: a
  read after answers, and one before a request when the newest is more than a second old (else a
  request sent just after a refresh would be reported one version staler than it is); the first
  answer of a process has its upper bound alone;
* **unknown** (a server that reports nothing, e.g. an OpenAI-compatible API): ``None``. The
  runtime then stamps the env's step as an estimate and says so once.

Every generation made inside an item's context is also noted in that item's ``GenerationLog``
(``generation_log``), so a group gets the span of all its generations even when the env copies
tokens without versions (Atropos's env files).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Optional

Span = tuple[int, int]
"""``(first, last)`` weights version of one completion."""


def parse_version(label: Any) -> Optional[int]:
    """A server's version label as a trainer step: an int, or a string of digits; None for
    anything else (vLLM's ``"default"`` before the trainer labelled a push)."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        return label if label >= 0 else None
    if isinstance(label, str) and label.strip().isdigit():
        return int(label.strip())
    return None


def span_of_labels(labels: Iterable[Any]) -> Optional[Span]:
    """The span of several version labels (None when none of them is a trainer step)."""
    versions = [v for v in (parse_version(x) for x in labels) if v is not None]
    return (min(versions), max(versions)) if versions else None


def span_from_stamps(stamps: Any) -> Optional[Span]:
    """The span of one choice's ``weight_versions`` (``[{"version", "start", "end"}, ...]``)."""
    if not isinstance(stamps, list):
        return None
    return span_of_labels(s.get("version") for s in stamps if isinstance(s, dict))


def merge(a: Optional[Span], b: Optional[Span]) -> Optional[Span]:
    """The span covering both (either may be unknown)."""
    if a is None:
        return b
    if b is None:
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))


class TokenResult(tuple):  # type: ignore[type-arg]
    """``(prompt_tokens, output_tokens, output_logprobs, finish_reasons)`` as before (unpacks into
    four), plus ``versions``: one ``Span`` (or None) per output."""

    versions: list[Optional[Span]]

    def __new__(
        cls,
        prompt: list[int],
        outs: list[list[int]],
        logprobs: list[list[float]],
        reasons: list[str],
        versions: Optional[list[Optional[Span]]] = None,
    ) -> TokenResult:
        self = super().__new__(cls, (prompt, outs, logprobs, reasons))
        self.versions = list(versions) if versions is not None else [None] * len(outs)
        return self


def result_versions(result: Any) -> list[Optional[Span]]:
    """The per-output spans of a tokens answer (all None for a plain 4-tuple)."""
    versions = getattr(result, "versions", None)
    if versions is not None:
        return list(versions)
    return [None] * len(result[1])


class VersionProbe:
    """Reads a server's current weights version, one read at a time, shared by the requests that
    need one (see the module docstring). ``read`` returns the version, None when the server has
    no trainer label yet, and raises ``LookupError`` when the server cannot report one at all
    (then the probe stops asking)."""

    def __init__(self, read: Callable[[], Awaitable[Optional[int]]]) -> None:
        self._read = read
        self.supported: Optional[bool] = None  # None: not asked yet
        self.last: Optional[int] = None  # the newest version read (versions only grow)
        self.reads = 0  # reads started so far
        self._task: Optional[asyncio.Task[Optional[int]]] = None
        self._task_number = 0  # which read the current task is
        self._began = False  # the current task has started running
        self.read_at: Optional[float] = None  # when the newest completed read was sent

    async def _do_read(self) -> Optional[int]:
        self._began = True  # from here on the read may reach the server before a later answer
        sent = time.monotonic()
        try:
            version = await self._read()
        except LookupError:
            self.supported = False
            return None
        except Exception:  # noqa: BLE001 - a failed read is no report, the request goes on
            return None
        self.supported = True
        self.read_at = sent if self.read_at is None else max(self.read_at, sent)
        if version is not None:
            self.last = version if self.last is None else max(self.last, version)
        return version

    def _start(self) -> asyncio.Task[Optional[int]]:
        self.reads += 1
        self._task_number = self.reads
        self._began = False
        self._task = asyncio.ensure_future(self._do_read())
        return self._task

    def _pending(self) -> Optional[asyncio.Task[Optional[int]]]:
        return self._task if self._task is not None and not self._task.done() else None

    def lower(self) -> Optional[int]:
        """A version no newer than the one a request sent now will use: the newest one read
        (None before the first read: the first answer's span is then its upper bound alone)."""
        return self.last

    async def recent_lower(self, max_age: float) -> Optional[int]:
        """``lower``, from a read at most ``max_age`` seconds old: after a refresh the newest read
        may predate it, and the request would be reported one version staler than it is. A read
        under way is joined (it reaches the server before this request is sent)."""
        if self.supported is not True:
            return self.last
        if self.read_at is None or time.monotonic() - self.read_at > max_age:
            await asyncio.shield(self._pending() or self._start())
        return self.last

    async def upper(self) -> Optional[int]:
        """A version no older than the one that finished a request answered before this call:
        from a read sent after the call (one not yet sent, or started since, is joined)."""
        if self.supported is False:
            return None
        mark = self.reads
        while True:
            task = self._pending()
            if task is None:
                return await asyncio.shield(self._start())
            if self._task_number > mark or not self._began:
                return await asyncio.shield(task)
            await asyncio.gather(asyncio.shield(task), return_exceptions=True)

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()


__all__ = [
    "Span",
    "TokenResult",
    "VersionProbe",
    "merge",
    "parse_version",
    "result_versions",
    "span_from_stamps",
    "span_of_labels",
]

"""What the inference servers said about one item's generations, beyond the tokens.

The env runtime sets a ``GenerationLog`` for every item it runs (``item_log``, a context variable:
the env's own tasks inherit it); the backends note in it, for every answer, the weights-version span
of each completion (``weights_version``) and the tokens that came back without a logprob. The runtime
reads it when the item's groups are sent: a group's ``weights_versions`` default to the span of all
the item's generations, and missing logprobs are counted and said once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Optional

from atroposlib.inference_clients.weights_version import Span, merge


class GenerationLog:
    """One item's generations (see the module docstring)."""

    def __init__(self) -> None:
        self.span: Optional[Span] = None  # weights versions of every generation, first to last
        self.unknown_versions = 0  # completions whose server reported no version
        self.missing_logprobs = 0  # completions that came back with tokens lacking a logprob

    def note_versions(self, spans: Iterable[Optional[Span]]) -> None:
        for span in spans:
            if span is None:
                self.unknown_versions += 1
            else:
                self.span = merge(self.span, span)


item_log: contextvars.ContextVar[Optional[GenerationLog]] = contextvars.ContextVar(
    "item_log", default=None
)
"""Set by the env runtime for each item (None outside an item: nothing is noted)."""


def note_versions(spans: Iterable[Optional[Span]]) -> None:
    """Note the spans of one answer's completions in the current item's log."""
    log = item_log.get()
    if log is not None:
        log.note_versions(spans)


def note_missing_logprobs(completions: int) -> None:
    """Note that ``completions`` outputs of one answer lack a logprob for some token."""
    log = item_log.get()
    if log is not None and completions:
        log.missing_logprobs += completions


__all__ = ["GenerationLog", "item_log", "note_missing_logprobs", "note_versions"]

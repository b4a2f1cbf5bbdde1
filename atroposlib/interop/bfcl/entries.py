"""What crosses the boundary to the BFCL worker: a test entry (``BfclEntry``), a model's answer to one
(``Answer``: prompt mode's text, or function-calling mode's calls) and the checker's verdict
(``Verdict``: valid or not, BFCL's error type and messages, the decoded calls)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

MALFORMED_ERROR_TYPES = frozenset(
    {"ast_decoder:decoder_failed", "ast_decoder:decoder_wrong_output_format"}
)
"""BFCL's error types for an answer that is not a list of calls at all (the rest judge the calls)."""
WRONG_COUNT_SUFFIX = ":wrong_count"
"""How BFCL's checkers name a list with too many or too few calls (``simple_function_checker:wrong_count``,
``multiple_function_checker:wrong_count``, ``parallel_function_checker_no_order:wrong_count``, ...)."""
RELEVANCE_ERROR_PREFIXES = ("irrelevance_error:", "relevance_error:")
"""A call where none was asked for, or none where one was (the relevance categories: a count of 0 or 1)."""
INCOMPLETE_CALL_SUFFIXES = (":missing_required", ":wrong_func_name")
"""How BFCL's simple and multiple checkers name a call that leaves out a required parameter or names a
function other than the one asked for (``simple_function_checker:missing_required``, ...)."""


@dataclass(frozen=True)
class BfclEntry:
    """One BFCL test entry as the model meets it: ``messages`` (BFCL's prompt-mode conversation: its
    system prompt with the function docs, then the question), ``functions`` (the docs), ``tools`` (the
    same as OpenAI tools, for function-calling mode), ``ground_truth`` (None for relevance categories)."""

    id: str
    category: str
    question: str
    messages: tuple[Mapping[str, Any], ...]
    functions: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...]
    ground_truth: Optional[tuple[Mapping[str, Any], ...]]
    parts: tuple[str, ...] = ()
    """For a composed training item: the ids of the entries it is made of."""

    @classmethod
    def from_worker(cls, row: Mapping[str, Any]) -> BfclEntry:
        truth = row.get("ground_truth")
        return cls(
            id=str(row["id"]),
            category=str(row["category"]),
            question=str(row.get("question", "")),
            messages=tuple(row["messages"]),
            functions=tuple(row["functions"]),
            tools=tuple(row["tools"]),
            ground_truth=tuple(truth) if truth is not None else None,
            parts=tuple(str(p) for p in row.get("parts") or ()),
        )

    def chat(self) -> list[dict[str, Any]]:
        """The prompt-mode conversation as fresh dicts (a chat completion's ``messages``)."""
        return [dict(m) for m in self.messages]


@dataclass(frozen=True)
class Answer:
    """A model's answer to entry ``id``: ``text`` in prompt mode (the leaderboard's "Prompt": Python call
    lists in the reply), ``calls`` in function-calling mode (its "FC": ``[{"name", "arguments"}]`` from
    the server's tool parser)."""

    id: str
    text: Optional[str] = None
    calls: Optional[Sequence[Mapping[str, Any]]] = None

    @property
    def mode(self) -> str:
        return "fc" if self.calls is not None else "prompt"

    def request(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "mode": self.mode}
        if self.calls is not None:
            body["calls"] = [dict(c) for c in self.calls]
        else:
            body["text"] = self.text or ""
        return body


@dataclass(frozen=True)
class Verdict:
    """The official checker's decision on one answer; ``error_type`` is BFCL's (None when valid)."""

    id: str
    valid: bool
    error_type: Optional[str] = None
    errors: tuple[str, ...] = ()
    decoded: Any = field(default=None, compare=False)
    parts: int = 0
    """For a composed item: how many entries it is made of (0 for BFCL's own entries)."""
    parts_accepted: int = 0
    """For a composed item: how many of its parts the checker accepts one of the answer's calls for, as
    the answer to that part's own entry (a call counts for one part at most)."""

    @classmethod
    def from_worker(cls, row: Mapping[str, Any]) -> Verdict:
        return cls(
            id=str(row.get("id")),
            valid=bool(row["valid"]),
            error_type=row.get("error_type"),
            errors=tuple(str(e) for e in row.get("errors") or ()),
            decoded=row.get("decoded"),
            parts=int(row.get("parts") or 0),
            parts_accepted=int(row.get("parts_accepted") or 0),
        )

    @property
    def malformed(self) -> bool:
        """The answer is not a list of calls at all (BFCL's decoder failed on it)."""
        return self.error_type in MALFORMED_ERROR_TYPES

    @property
    def right_count(self) -> bool:
        """The answer is a list of as many calls as the entry asks for: valid, or rejected by BFCL for
        what is in the calls (a name, a parameter, a value), not for being no list or the wrong length."""
        kind = self.error_type or ""
        return self.valid or not (
            self.malformed
            or kind.endswith(WRONG_COUNT_SUFFIX)
            or kind.startswith(RELEVANCE_ERROR_PREFIXES)
        )

    @property
    def incomplete_call(self) -> bool:
        """BFCL rejected a call for a required parameter left out or a wrong function name (its simple
        and multiple checkers say so; its parallel ones report ``cannot_find_match`` instead)."""
        return (self.error_type or "").endswith(INCOMPLETE_CALL_SUFFIXES)

    @property
    def part_share(self) -> float:
        """For a composed item: its accepted parts over the larger of the parts asked and the calls
        written (an extra call costs as a missing one does); 0.0 for BFCL's own entries."""
        if not self.parts:
            return 0.0
        written = len(self.decoded) if isinstance(self.decoded, list) else 0
        return self.parts_accepted / max(self.parts, written)

    @property
    def reason(self) -> str:
        """One line: ``valid``, or the error type and its first message."""
        if self.valid:
            return "valid"
        first = self.errors[0] if self.errors else ""
        return f"{self.error_type}: {first}"[:300]


__all__ = [
    "INCOMPLETE_CALL_SUFFIXES",
    "MALFORMED_ERROR_TYPES",
    "RELEVANCE_ERROR_PREFIXES",
    "WRONG_COUNT_SUFFIX",
    "Answer",
    "BfclEntry",
    "Verdict",
]

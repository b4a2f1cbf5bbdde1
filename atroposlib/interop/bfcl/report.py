"""What a BFCL evaluation found: every entry's answer and verdict (``ItemResult``), and ``BfclReport``:
accuracy per category with its one-standard-error bar, BFCL's aggregates, the checker's error types,
answers cut at the token budget, as a JSON summary and as a printed table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.interop.bfcl.entries import Verdict
from atroposlib.interop.bfcl.scores import Score, aggregates, category_score, error_types


@dataclass(frozen=True)
class ItemResult:
    """One entry: the model's reply (``text``; ``calls`` in FC mode), whether it was cut at the
    budget (``cut``), and the official verdict."""

    entry_id: str
    category: str
    text: str
    verdict: Verdict
    calls: Optional[Sequence[Mapping[str, Any]]] = None
    cut: bool = False

    def record(self) -> dict[str, Any]:
        """One line of a results file."""
        return {
            "id": self.entry_id,
            "category": self.category,
            "valid": self.verdict.valid,
            "error_type": self.verdict.error_type,
            "errors": list(self.verdict.errors),
            "cut": self.cut,
            "text": self.text,
            "calls": list(self.calls) if self.calls is not None else None,
            "decoded": self.verdict.decoded,
        }


@dataclass
class BfclReport:
    """The results of one evaluation; ``mode`` is ``prompt`` or ``fc``."""

    results: list[ItemResult]
    mode: str = "prompt"
    skipped: dict[str, int] = field(default_factory=dict)

    def by_category(self) -> dict[str, Score]:
        cats: dict[str, list[bool]] = {}
        for r in self.results:
            cats.setdefault(r.category, []).append(r.verdict.valid)
        return {c: category_score(v) for c, v in cats.items()}

    def aggregates(self) -> dict[str, Score]:
        return aggregates(self.by_category())

    def error_types(self) -> dict[str, dict[str, int]]:
        return error_types(
            (r.category, r.verdict.valid, r.verdict.error_type) for r in self.results
        )

    def malformed(self) -> int:
        """Answers that are no list of calls at all (BFCL's decoder failed on them)."""
        return sum(r.verdict.malformed for r in self.results)

    def summary(self) -> dict[str, Any]:
        """Everything but the per-entry rows, JSON-ready."""
        return {
            "mode": self.mode,
            "entries": len(self.results),
            "by_category": {c: s.as_dict() for c, s in self.by_category().items()},
            "aggregates": {k: s.as_dict() for k, s in self.aggregates().items()},
            "error_types": self.error_types(),
            "malformed": self.malformed(),
            "cut_at_budget": sum(r.cut for r in self.results),
            "skipped": dict(self.skipped),
        }

    def table(self) -> str:
        """The printed form: one line per category, then the aggregates."""
        lines = [f"{'category':<24} {'n':>5}  accuracy (± 1 SE, points)"]
        for name, s in self.by_category().items():
            lines.append(f"{name:<24} {s.n:>5}  {s.text()}")
        for name, s in self.aggregates().items():
            lines.append(f"{name:<24} {s.n:>5}  {s.text()}")
        lines.append(
            f"malformed answers: {self.malformed()} of {len(self.results)}; cut at the token "
            f"budget: {sum(r.cut for r in self.results)}"
        )
        return "\n".join(lines)


__all__ = ["BfclReport", "ItemResult"]

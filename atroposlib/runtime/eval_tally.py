"""``EvalTally``: the items of one ``evaluate()`` run, how many were evaluated and how many skipped
and why (``RunContext.eval_tally``; filled by ``eval_items.evaluate_items``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class EvalTally:
    """Items of one ``evaluate()`` run: how many there are, how many were evaluated, skipped why."""

    total: Optional[int] = None
    done: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def progress(self) -> str:
        """``"40/100 item(s), 2 skipped"`` (``""`` when the env did not say how many)."""
        if self.total is None:
            return ""
        skipped = sum(self.skipped.values())
        finished = self.done + skipped
        return f"{finished}/{self.total} item(s)" + (f", {skipped} skipped" if skipped else "")

    def summary(self) -> str:
        """``"98 of 100 item(s) evaluated, 2 skipped (prompt longer than max_token_length: 2)"``."""
        if self.total is None:
            return ""
        text = f"{self.done} of {self.total} item(s) evaluated"
        if self.skipped:
            reasons = ", ".join(f"{r}: {n}" for r, n in self.skipped.most_common())
            text += f", {sum(self.skipped.values())} skipped ({reasons})"
        return text

    def as_json(self) -> dict[str, Any]:
        """What ``metrics.json`` records under ``config_general.eval_items``."""
        return {
            "total": self.total,
            "evaluated": self.done,
            "skipped": sum(self.skipped.values()),
            "skipped_by_reason": dict(self.skipped),
        }


__all__ = ["EvalTally"]

"""What managed sessions count: token drifts, dropped episodes, tool calls that did not parse.

One ``ManagedStats`` belongs to a ``ServerManager`` and is shared by every ``managed_server`` session
it opens, so an env (``self.server.managed_stats``) and its runtime (the step metrics through
``ServerManager.wandb_metrics``, the ``process`` summary, the end of ``serve``) read one set of
counts per env. The first event of each kind is logged at WARNING with what it means; later ones
are only counted.

Kinds of token drift (see ``managed_server``): ``template`` (re-rendering the conversation with
the chat template gives other text than the tokens the model saw, e.g. a template that drops
earlier ``<think>`` blocks), ``retokenization`` (same text, other token ids: the model wrote a
tokenization the tokenizer would not produce), ``unsplittable`` (the template cannot render a new
turn on its own, so its tokens come from a full re-rendering), ``server_prompt`` (the server echoed
other prompt ids than it was sent).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

_DRIFT_HINT = {
    "template": "the chat template re-renders earlier turns differently from the tokens the model saw",
    "retokenization": "the model wrote a tokenization that re-tokenizing the text would not give",
    "unsplittable": "the chat template cannot render a new turn on its own",
    "server_prompt": "the server echoed other prompt token ids than it was sent",
}


@dataclass
class ManagedStats:
    """Counts of one env's managed sessions (see the module docstring)."""

    sessions: int = 0
    drifts: Counter[str] = field(default_factory=Counter)
    dropped_episodes: int = 0
    tool_parse_errors: Counter[str] = field(default_factory=Counter)
    history_edits: int = 0
    text_only_sessions: int = 0
    _logged: set[str] = field(default_factory=set, repr=False)

    @property
    def drift_total(self) -> int:
        """Token drifts of every kind."""
        return sum(self.drifts.values())

    def _first(self, key: str) -> bool:
        if key in self._logged:
            return False
        self._logged.add(key)
        return True

    def drift(self, kind: str, mode: str) -> None:
        """Count one drift of ``kind``; ``mode`` is what the session does about it."""
        self.drifts[kind] += 1
        if self._first(f"drift:{kind}"):
            action = {
                "keep": "training the exact tokens the model saw",
                "split": "starting a new sequence from the re-rendered conversation (split)",
                "drop": "dropping the episode",
            }.get(mode, mode)
            logger.warning(
                "token drift (%s): %s; %s (on_token_drift=%s). Further drifts of this kind are "
                "counted (managed/token_drifts), not logged",
                kind,
                _DRIFT_HINT.get(kind, kind),
                action,
                mode,
            )

    def dropped(self) -> None:
        """Count one episode dropped for drift (``on_token_drift='drop'``)."""
        self.dropped_episodes += 1

    def tool_parse_error(self, kind: str, example: str) -> None:
        """Count one ``<tool_call>`` block that did not parse (``kind``: why)."""
        self.tool_parse_errors[kind] += 1
        if self._first(f"tool:{kind}"):
            logger.warning(
                "a tool call did not parse (%s): %.160r; it is returned to the env in "
                "message.tool_call_errors. Further errors of this kind are counted "
                "(managed/tool_call_parse_errors), not logged",
                kind,
                example,
            )

    def history_edit(self) -> None:
        """Count one turn whose replayed assistant message differs from what the model wrote."""
        self.history_edits += 1
        if self._first("history_edit"):
            logger.warning(
                "a managed chat turn replays an assistant message that differs from what the model "
                "wrote: it starts a new sequence (the earlier turns are tracked separately). Send "
                "the returned message back unchanged to keep one exact sequence per episode. "
                "Further cases are counted (managed/history_edits), not logged"
            )

    def text_only(self, backend: str) -> None:
        """Count one session on a backend that cannot take token ids."""
        self.text_only_sessions += 1
        if self._first("text_only"):
            logger.warning(
                "server_type %s cannot take or return token ids: managed sessions send text and "
                "tokenize the replies locally (placeholder logprobs); their tokens are not the "
                "server's and token drift cannot be detected",
                backend,
            )

    def metrics(self) -> dict[str, float]:
        """Step metrics: totals always, one entry per kind seen."""
        out: dict[str, float] = {
            "managed/sessions": float(self.sessions),
            "managed/token_drifts": float(self.drift_total),
            "managed/dropped_episodes": float(self.dropped_episodes),
            "managed/tool_call_parse_errors": float(sum(self.tool_parse_errors.values())),
        }
        for kind, n in self.drifts.items():
            out[f"managed/token_drifts_{kind}"] = float(n)
        if self.history_edits:
            out["managed/history_edits"] = float(self.history_edits)
        if self.text_only_sessions:
            out["managed/text_only_sessions"] = float(self.text_only_sessions)
        return out

    def summary(self) -> str:
        """One line for a run's summary: sessions and token drifts (also when 0, so a run can show
        it was token-exact), and whatever else was counted; empty when no session was opened."""
        if not self.sessions and not self.drifts and not self.tool_parse_errors:
            return ""
        parts = [f"{self.sessions} managed session(s)"]
        kinds = ", ".join(f"{k}: {n}" for k, n in self.drifts.most_common())
        parts.append(f"{self.drift_total} token drift(s)" + (f" ({kinds})" if kinds else ""))
        if self.dropped_episodes:
            parts.append(f"{self.dropped_episodes} episode(s) dropped for drift")
        if self.tool_parse_errors:
            kinds = ", ".join(f"{k}: {n}" for k, n in self.tool_parse_errors.most_common())
            total = sum(self.tool_parse_errors.values())
            parts.append(f"{total} tool call(s) that did not parse ({kinds})")
        if self.history_edits:
            parts.append(f"{self.history_edits} edited assistant turn(s)")
        if self.text_only_sessions:
            parts.append(f"{self.text_only_sessions} text-only managed session(s)")
        return ", ".join(parts)


__all__ = ["ManagedStats"]

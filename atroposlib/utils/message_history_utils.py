"""Keeping multi-turn histories short (Atropos's ``atroposlib.utils.message_history_utils``).

* ``strip_thinking`` / ``truncate_thinking`` shorten the ``<think>...</think>`` block of a reply
  before it goes back into the next turn's prompt;
* ``ensure_trajectory_token_limit`` makes every step of an episode (a list of ``ScoredDataGroup``
  with ``messages``/``tokens``/``masks``) fit a token budget by dropping the oldest turns of all
  alternatives alike and re-tokenizing; a step that cannot fit is dropped (logged), never truncated
  mid-sequence.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from atroposlib.type_definitions import ScoredDataGroup
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

logger = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
AGENT_ROLES = ("assistant", "agent")


def _think_span(text: str) -> Optional[tuple[int, int]]:
    start, end = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    if start == -1 or end == -1 or end < start:
        return None
    return start, end


def strip_thinking(response_text: str) -> str:
    """``response_text`` without its ``<think>...</think>`` block (unchanged when there is none)."""
    span = _think_span(response_text)
    if span is None:
        return response_text
    return response_text[: span[0]] + response_text[span[1] + len(THINK_CLOSE) :]


def truncate_thinking(response_text: str, tokenizer: Any, max_think_tokens: int) -> str:
    """Keep at most ``max_think_tokens`` tokens of the thinking block.

    When the block is too long, its last paragraph is kept if that fits, else its last
    ``max_think_tokens`` tokens; the kept text is prefixed with ``"... "``. Text outside the block is
    untouched; a reply without a well-formed block is returned as is."""
    span = _think_span(response_text)
    if span is None:
        return response_text
    head = response_text[: span[0] + len(THINK_OPEN)].rstrip()
    tail = response_text[span[1] :].lstrip()
    inner = response_text[span[0] + len(THINK_OPEN) : span[1]].strip()
    if not inner:
        return head + tail
    ids = list(tokenizer.encode(inner, add_special_tokens=False))
    if len(ids) <= max_think_tokens:
        kept = tokenizer.decode(ids, skip_special_tokens=True).strip()
    else:
        paragraphs = [p.strip() for p in inner.split("\n\n") if p.strip()]
        last = paragraphs[-1] if paragraphs else ""
        last_ids = list(tokenizer.encode(last, add_special_tokens=False)) if last else []
        if last and len(last) < len(inner) and len(last_ids) <= max_think_tokens:
            keep_ids = last_ids
        else:
            keep_ids = ids[max(0, len(ids) - max_think_tokens) :] if max_think_tokens > 0 else []
        decoded = tokenizer.decode(keep_ids, skip_special_tokens=True).strip()
        kept = f"... {decoded}" if decoded else ""
    return f"{head}\n{kept}\n{tail}" if kept else head + tail


def _poppable(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many of the oldest non-system turns may go now (0: only the protected minimum is left).

    Protected: the first message (system prompt), the last agent reply and the observation that
    precedes it. An (environment/user, agent) pair is removed together when possible."""
    keep_end = 0
    if len(messages) > 1 and messages[-1].get("role") in AGENT_ROLES:
        keep_end = 2 if len(messages) > 2 and messages[-2].get("role") != "system" else 1
    room = len(messages) - 1 - keep_end
    if room <= 0:
        return 0
    if room >= 2 and messages[2].get("role") in AGENT_ROLES:
        return 2
    return 1


def _fit_step(step: ScoredDataGroup, tokenizer: Any, limit: int) -> Optional[ScoredDataGroup]:
    messages = [list(m) for m in step["messages"] or []]
    while True:
        counts = [_poppable(m) for m in messages]
        if not counts or min(counts) == 0:
            return None
        n = min(counts)
        for m in messages:
            del m[1 : 1 + n]
        encoded = [tokenize_for_trainer(tokenizer, m) for m in messages]
        if max(len(e["tokens"]) for e in encoded) <= limit:
            fitted = dict(step)
            fitted["messages"] = messages
            fitted["tokens"] = [e["tokens"] for e in encoded]
            fitted["masks"] = [e["masks"] for e in encoded]
            return fitted  # type: ignore[return-value]


def ensure_trajectory_token_limit(
    trajectory: list[ScoredDataGroup], tokenizer: Any, max_trajectory_tokens: int
) -> list[ScoredDataGroup]:
    """The steps of ``trajectory`` that fit ``max_trajectory_tokens`` (see the module docstring).

    Steps lacking ``messages``/``tokens``/``masks`` are skipped with a warning, as Atropos does."""
    out: list[ScoredDataGroup] = []
    for i, step in enumerate(trajectory or []):
        if not (step.get("messages") and step.get("tokens") and step.get("masks")):
            logger.warning("trajectory step %d lacks messages/tokens/masks; skipped", i)
            continue
        longest = max((len(t) for t in step["tokens"]), default=0)
        if longest <= max_trajectory_tokens:
            out.append(step)
            continue
        try:
            fitted = _fit_step(step, tokenizer, max_trajectory_tokens)
        except Exception as e:  # a template that cannot render a shortened chat
            logger.warning("trajectory step %d could not be re-tokenized (%s); dropped", i, e)
            continue
        if fitted is None:
            logger.warning(
                "trajectory step %d needs %d tokens, over the limit %d even with the oldest turns "
                "removed; dropped",
                i,
                longest,
                max_trajectory_tokens,
            )
            continue
        out.append(fitted)
    return out


__all__ = ["ensure_trajectory_token_limit", "strip_thinking", "truncate_thinking"]

"""The tokens of a new chat turn, appended to an episode's exact tokens, and the check for drift.

A managed episode's tokens are what the server saw and returned. To ask for the next turn, the new
messages (tool results, a user turn) and the template's turn markers must be appended to those
tokens, without re-rendering the history: a chat template may render earlier turns differently from
the tokens the model saw (Qwen3-style templates drop old ``<think>`` blocks).

``new_turn_text`` renders the new messages after a fixed two-message *anchor* conversation and
keeps what follows the anchor: the template's text closing the last assistant turn (less what the
model already wrote of it: its end-of-turn token), the new messages, the generation prompt. For the
templates in use (ChatML, Llama 3, Hermes tools, Qwen) how a turn renders does not depend on the
history before it. A template whose rendering of the anchor is not a prefix of the longer rendering
is tried again with the episode's own conversation; when neither works the turn cannot be rendered
on its own (``None``).

``drift_kind`` compares the exact tokens with a full re-rendering of the conversation (what the
trainer would get by re-tokenizing it): None when they are equal, else the kind of difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

Render = Callable[[list[dict[str, Any]], bool], str]
"""``render(messages, add_generation_prompt)``: the conversation as the chat template writes it."""

_ANCHOR_USER = "Anchor question 7f3a."
_ANCHOR_REPLY = "Anchor reply 7f3a."


def _closing_text(rendered: str, reply: str, model_wrote: str) -> Optional[str]:
    """What the template writes after the assistant content ``reply`` in ``rendered``, less the
    ``model_wrote`` (the model's own end-of-turn token) it starts with."""
    at = rendered.rfind(reply)
    if at < 0:
        return None
    closer = rendered[at + len(reply) :]
    if model_wrote and closer.startswith(model_wrote):
        closer = closer[len(model_wrote) :]
    return closer


def new_turn_text(
    render: Render,
    new_messages: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]],
    model_wrote_end: str,
) -> Optional[str]:
    """The text to append after an episode's tokens for ``new_messages`` (see the module docstring).

    ``history`` is the episode's conversation so far (ending with the assistant turn the model
    wrote); ``model_wrote_end`` the text of the model's end-of-turn token when its reply ended with
    one (''), so that it is not written twice."""
    new = [dict(m) for m in new_messages]
    anchor = [
        {"role": "user", "content": _ANCHOR_USER},
        {"role": "assistant", "content": _ANCHOR_REPLY},
    ]
    for prefix, reply in ((anchor, _ANCHOR_REPLY), (list(history), None)):
        try:
            base = render([dict(m) for m in prefix], False)
            full = render([*[dict(m) for m in prefix], *new], True)
        except Exception:  # noqa: BLE001 - a template that refuses this shape: try the next
            continue
        if not full.startswith(base):
            continue
        if reply is None:
            last = prefix[-1].get("content") if prefix else None
            reply = last if isinstance(last, str) and last else None
        if reply is None:
            continue
        closer = _closing_text(base, reply, model_wrote_end)
        if closer is None:
            continue
        return closer + full[len(base) :]
    return None


def drift_kind(
    exact_ids: Sequence[int], rendered_text: str, rendered_ids: Sequence[int], decode: Any
) -> Optional[str]:
    """None when ``exact_ids`` equal ``rendered_ids`` (the conversation re-rendered and tokenized);
    else ``"template"`` when their text differs too, ``"retokenization"`` when only the ids do."""
    if list(exact_ids) == list(rendered_ids):
        return None
    return "retokenization" if decode(list(exact_ids)) == rendered_text else "template"


__all__ = ["Render", "drift_kind", "new_turn_text"]

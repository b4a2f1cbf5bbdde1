"""``tokenize_for_trainer``: tokens and loss masks from a chat, for text-only inference backends.

The chat is rendered with the tokenizer's chat template and tokenized; trained tokens keep their id
in ``masks``, everything else is -100. By default only the final message is trained on (Atropos's
default); ``train_on_all_assistant_turns=True`` trains every assistant/agent turn instead.
When generation stopped for length (``finish_reason="length"``), the end-of-turn tokens the template
would add after the last assistant message are dropped: the model never produced them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from atroposlib.type_definitions import MASK_IGNORE

TRAINED_ROLES = ("assistant", "agent")


def render_chat(
    tokenizer: Any, messages: Sequence[dict[str, Any]], add_generation_prompt: bool
) -> str:
    """The chat template's text for ``messages``."""
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=add_generation_prompt
    )


def chat_token_ids(
    tokenizer: Any, messages: Sequence[dict[str, Any]], add_generation_prompt: bool
) -> list[int]:
    """Token ids of the rendered chat (the template supplies any BOS itself)."""
    return list(
        tokenizer.encode(
            render_chat(tokenizer, messages, add_generation_prompt), add_special_tokens=False
        )
    )


def _content_start(tokenizer: Any, chat: list[dict[str, Any]], i: int) -> int:
    """Token index where message ``i``'s content starts (after its role header)."""
    if chat[i].get("role") == "assistant":
        return len(chat_token_ids(tokenizer, chat[:i], add_generation_prompt=True))
    marker = "\u241fcontent\u241f"
    text = render_chat(
        tokenizer, chat[:i] + [{**chat[i], "content": marker}], add_generation_prompt=False
    )
    at = text.find(marker)
    if at < 0:
        return len(chat_token_ids(tokenizer, chat[:i], add_generation_prompt=False))
    return len(tokenizer.encode(text[:at], add_special_tokens=False))


def tokenize_for_trainer(
    tokenizer: Any,
    chat: Sequence[Mapping[str, Any]],
    include_messages: bool = False,
    train_on_all_assistant_turns: bool = False,
    finish_reason: Optional[str] = "",
) -> dict[str, Any]:
    """Return ``{"tokens": [...], "masks": [...]}`` (plus ``"messages"`` when ``include_messages``)."""
    turns = [dict(m) for m in chat]
    if not turns:
        raise ValueError("tokenize_for_trainer: chat is empty")
    last = len(turns) - 1
    if finish_reason == "length" and turns[last].get("role") == "assistant":
        prefix = chat_token_ids(tokenizer, turns[:last], add_generation_prompt=True)
        content = turns[last].get("content") or ""
        tokens = prefix + list(tokenizer.encode(str(content), add_special_tokens=False))
    else:
        tokens = chat_token_ids(tokenizer, turns, add_generation_prompt=False)
    masks = [MASK_IGNORE] * len(tokens)
    if train_on_all_assistant_turns:
        trained = [i for i, m in enumerate(turns) if m.get("role") in TRAINED_ROLES]
    else:
        trained = [last]  # as Atropos: the final message, whatever its role
    for i in trained:
        start = _content_start(tokenizer, turns, i)
        end = (
            len(tokens)
            if i == last
            else len(chat_token_ids(tokenizer, turns[: i + 1], add_generation_prompt=False))
        )
        for j in range(start, min(end, len(tokens))):
            masks[j] = tokens[j]
    out: dict[str, Any] = {"tokens": tokens, "masks": masks}
    if include_messages:
        out["messages"] = turns
    return out


__all__ = ["chat_token_ids", "render_chat", "tokenize_for_trainer"]

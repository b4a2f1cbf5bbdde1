"""Chat helpers shared by the environments: prompts, the messages a group keeps, and the token budget
left for a completion."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.errors import ConfigError, PromptTooLong

logger = logging.getLogger(__name__)

THINKING_PROMPT = (
    "You are a deep thinking AI. You may reason at length inside <think> </think> tags before you "
    "answer; then give your final answer after the closing tag."
)


def system_prompt(
    task_instruction: str, thinking: bool = True, thinking_prompt: Optional[str] = None
) -> str:
    """The system prompt: the thinking preamble (optional) followed by the task's answer format.

    ``thinking_prompt`` (an env's ``--env.custom_thinking_prompt``) replaces the default preamble."""
    if not thinking:
        return task_instruction
    return f"{thinking_prompt or THINKING_PROMPT}\n\n{task_instruction}"


def chat(system: str, user: str) -> list[dict[str, str]]:
    """A two-message conversation (system + user)."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def transcript(
    messages: Sequence[dict[str, Any]], answer: str, note: Optional[str] = None
) -> list[dict[str, Any]]:
    """What a group keeps of one rollout: the prompt ``messages``, the ``answer`` as the assistant's
    turn and, when given, the grader's ``note`` on it (viewers show it; SFT/DPO export leaves it out)."""
    turns = [*messages, {"role": "assistant", "content": answer}]
    return turns if note is None else [*turns, {"role": "grader", "content": note}]


def completion_budget(
    tokenizer: Any, messages: Sequence[dict[str, Any]], max_token_length: int, minimum: int = 8
) -> int:
    """Tokens left for the completion so that prompt + completion fits in ``max_token_length``.

    Raises ``PromptTooLong`` (a ``ValueError``) with the numbers when fewer than ``minimum`` tokens
    are left; an evaluation through ``evaluate_items`` skips and counts such an item."""
    rendered = tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
    )
    prompt_len = len(tokenizer.encode(rendered, add_special_tokens=False))
    if max_token_length - prompt_len < minimum:
        raise PromptTooLong(
            f"the prompt is {prompt_len} tokens and max_token_length is {max_token_length}: no "
            "room for an answer (raise --env.max_token_length or use a shorter prompt)"
        )
    return max_token_length - prompt_len


def require_room(
    tokenizer: Any, messages: Sequence[dict[str, Any]], max_token_length: int, minimum: int = 64
) -> None:
    """For ``setup``: raise ``ConfigError`` when a fixed prompt leaves fewer than ``minimum`` tokens."""
    try:
        completion_budget(tokenizer, messages, max_token_length, minimum)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def episode_node(managed: Any) -> Any:
    """The one tracked node of a multi-turn episode run inside a single ``managed_server`` context.

    Each turn extends the previous node with the new turn's tokens, so exactly one node remains, even
    when the chat template re-renders earlier turns differently (a token drift, counted by the
    managed server). Several nodes remain only with ``on_token_drift="split"`` or when the env
    replays an assistant message other than the one the model wrote; then only the last node (the
    last turn) can be trained, and we say so instead of silently dropping the earlier turns."""
    nodes = managed.get_state()["nodes"]
    if len(nodes) != 1:
        logger.warning(
            "multi-turn tracking found %d nodes instead of 1 (on_token_drift=split, or an edited "
            "assistant turn): only the last turn is trained",
            len(nodes),
        )
    return nodes[-1]

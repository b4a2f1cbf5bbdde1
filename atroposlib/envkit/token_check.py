"""Is a multi-turn episode's trained sequence token-exact? A check against what the server saw and said.

Within one ``managed_server`` episode, each turn sends token ids (``completion.prompt_token_ids``) and
gets generated ids back (``choice.token_ids``). The sequence a group trains on (the episode's node:
``tokens`` and ``masks``) is token-exact when, for every turn, the ids the server saw are a prefix of
``tokens`` and the ids it generated follow them unchanged, and exactly those generated ids are trained
(every other position, the prompt, tool results and user turns, is masked). ``exactness_problem`` says
where the first difference is, or returns None; an env counts a non-None answer as a drift.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from atroposlib.type_definitions import MASK_IGNORE


@dataclass(frozen=True)
class TurnIds:
    """One turn as the server handled it: the ids it was sent and the ids it generated."""

    prompt: list[int]
    generated: list[int]

    @classmethod
    def of(cls, completion: Any, choice: Any) -> TurnIds:
        """From a managed ``chat_completion`` / ``completion`` answer and one of its choices."""
        prompt = getattr(completion, "prompt_token_ids", None)
        generated = getattr(choice, "token_ids", None)
        if prompt is None or generated is None:
            raise ValueError(
                "the answer carries no prompt_token_ids / token_ids (not a managed answer)"
            )
        return cls(list(prompt), list(generated))


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def exactness_problem(
    turns: Sequence[TurnIds], tokens: Sequence[int], masks: Sequence[int]
) -> Optional[str]:
    """None when ``tokens``/``masks`` hold every turn exactly (see the module docstring), else where
    the first difference is."""
    if len(tokens) != len(masks):
        return f"{len(tokens)} tokens but {len(masks)} masks"
    trained: set[int] = set()
    for k, turn in enumerate(turns):
        start, end = len(turn.prompt), len(turn.prompt) + len(turn.generated)
        if list(tokens[:start]) != turn.prompt:
            at = _first_difference(tokens[:start], turn.prompt)
            return f"turn {k + 1}: the prompt the server saw differs from the trained tokens at position {at}"
        if list(tokens[start:end]) != turn.generated:
            at = start + _first_difference(tokens[start:end], turn.generated)
            return (
                f"turn {k + 1}: the generated ids differ from the trained tokens at position {at}"
            )
        trained.update(range(start, end))
    for i, (token, mask) in enumerate(zip(tokens, masks, strict=True)):
        if i in trained and mask != token:
            return f"position {i}: a generated token is not trained (mask {mask}, token {token})"
        if i not in trained and mask != MASK_IGNORE:
            return f"position {i}: a token the model did not generate is trained"
    return None


__all__ = ["TurnIds", "exactness_problem"]

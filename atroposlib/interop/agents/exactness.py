"""Is each node of a proxy session token-exact? Every completion the session served, as the backend
handled it (the ids it was sent, the ids it generated per choice), is a turn; a node's turns are those
whose prompt and reply its tokens start with, and ``envkit.token_check.exactness_problem`` says where a
node differs from its turns (None: exact). A node none of whose turns the backend generated is a
problem too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from atroposlib.envkit.token_check import TurnIds, exactness_problem


def session_turns(completions: Sequence[dict[str, Any]]) -> list[TurnIds]:
    """One turn per choice of every completion."""
    return [
        TurnIds(list(c["prompt_token_ids"]), list(ids))
        for c in completions
        for ids in c["token_ids"]
    ]


def node_problem(
    tokens: Sequence[int], masks: Sequence[int], turns: Sequence[TurnIds]
) -> Optional[str]:
    """Where the node (``tokens``, ``masks``) is not exactly its turns, else None."""
    mine = [
        t
        for t in turns
        if list(tokens[: len(t.prompt) + len(t.generated)]) == t.prompt + t.generated
    ]
    if not mine:
        return "no completion of the session generated this node"
    return exactness_problem(mine, tokens, masks)


__all__ = ["node_problem", "session_turns"]

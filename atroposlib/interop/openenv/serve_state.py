"""``ServedEnv``: the state of one ``serve-openenv`` app, which its routes reach through ``serve_deps``.

The env (set up already, ``group_size`` 1), the session cap and the action field the app was made
with, the open sessions, and which item each reset seed took: the first reset with an integer seed
takes the env's next item, later resets with the same seed (a GRPO group's episodes) get that same
item; the last ``SEEDS_KEPT`` seeds are remembered. A reset without a seed takes the next item.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

SEEDS_KEPT = 4096


class ServedEnv:
    """What the routes of one app share (see the module docstring)."""

    def __init__(self, env: Any, max_sessions: int, action_field: str) -> None:
        self.env = env
        self.max_sessions = max_sessions
        self.action_field = action_field
        self.sessions: set[int] = set()  # id() of each open WebSocket
        self._by_seed: OrderedDict[int, Any] = OrderedDict()

    @property
    def full(self) -> bool:
        """Whether ``max_sessions`` sessions are open (a new one is refused)."""
        return len(self.sessions) >= self.max_sessions

    async def item_for(self, seed: Any) -> Any:
        """The item of a reset: the env's next one, or the one already given to ``seed``."""
        if not isinstance(seed, int) or isinstance(seed, bool):
            return await self.env.get_next_item()
        if seed in self._by_seed:
            self._by_seed.move_to_end(seed)
            return self._by_seed[seed]
        item = await self.env.get_next_item()
        if item is not None:
            self._by_seed[seed] = item
            while len(self._by_seed) > SEEDS_KEPT:
                self._by_seed.popitem(last=False)
        return item


__all__ = ["SEEDS_KEPT", "ServedEnv"]

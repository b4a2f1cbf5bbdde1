"""One OpenEnv episode of an Atropos env: its rollout for one item, paused at every model call.

``reset`` takes the env's next item and starts ``collect_trajectories(item)`` (``group_size`` 1) in a
task whose model calls are questions to the client (``client_replies``); the first question's prompt
is the reset observation. ``step(reply)`` answers the pending question; the rollout runs on to its next
question (the next observation, ``done`` false) or to its end: then the observation is final, ``done``
is true and the reward is the score the env's own scoring gave the rollout (``None`` when the env kept
no group for it, e.g. a reply it could not parse and dropped).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Optional

from atroposlib.errors import EpisodeOver  # defined with the package's other errors
from atroposlib.interop.openenv.client import StepResult
from atroposlib.interop.openenv.client_replies import CURRENT, EpisodeChannel, Question

logger = logging.getLogger(__name__)


@dataclass
class Frame(StepResult):
    """What one ``reset`` or ``step`` answers: the observation frame the client reads back."""

    def wire(self) -> dict[str, Any]:
        """The ``data`` of openenv's observation frame."""
        data: dict[str, Any] = {
            "observation": {**self.observation, "metadata": self.metadata},
            "reward": self.reward,
            "done": self.done,
        }
        if self.metadata:
            data["metadata"] = self.metadata
        return data


def _first_group(groups: Any) -> Any:
    items = groups if isinstance(groups, list) else [groups]
    return next((g for g in items if g is not None), None)


def _field(group: Any, name: str) -> Any:
    return group.get(name) if isinstance(group, dict) else getattr(group, name, None)


class BridgedEpisode:
    """One episode: the rollout task and the question it waits on."""

    def __init__(self, env: Any, item: Any) -> None:
        self.env, self.item = env, item
        self.channel = EpisodeChannel()
        self.pending: Optional[Question] = None
        self.steps = 0
        self.done = False
        self.task: Optional[asyncio.Task[Any]] = None

    async def _rollout(self) -> Any:
        CURRENT.set(self.channel)  # the rollout's model calls (and its sub-tasks') ask this episode
        groups, _ = await self.env.collect_trajectories(self.item)
        return groups

    async def start(self) -> Frame:
        self.task = asyncio.create_task(self._rollout())
        return await self._next()

    async def step(self, reply: str) -> Frame:
        if self.done or self.pending is None:
            raise EpisodeOver("the episode is over; send reset to start another")
        self.steps += 1
        self.pending.reply.set_result(reply)
        self.pending = None
        return await self._next()

    async def _next(self) -> Frame:
        assert self.task is not None
        question = asyncio.ensure_future(self.channel.questions.get())
        await asyncio.wait({question, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if question.done():
            self.pending = question.result()
            return Frame(dict(self.pending.observation))
        question.cancel()
        self.done = True
        groups = self.task.result()  # the rollout's own exception reaches the caller here
        group = _first_group(groups)
        if group is None:
            meta = {"kept": False, "steps": self.steps}
            return Frame({"prompt": "", "messages": None}, None, True, meta)
        scores = _field(group, "scores") or [None]
        messages = _field(group, "messages")
        score = scores[0]
        meta = {"kept": True, "steps": self.steps, "score": score}
        obs = {"prompt": "", "messages": messages[0] if messages else None}
        return Frame(obs, None if score is None else float(score), True, meta)

    async def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


__all__ = ["BridgedEpisode", "EpisodeOver", "Frame"]

"""One verifiers episode played by our policy: the verifiers env's own ``run(task, agents)`` drives it.

The env's agent seat is ours (``PolicySeat``): ``agents.<seat>.run(task)`` takes one reply;
``agents.<seat>.interaction(task)`` opens an exchange whose ``turn(message)`` sends the env's message
as a user turn and samples one reply (multi-turn envs such as verifiers' TextArena step their game
between turns). Every reply comes from our inference server through one ``managed_server`` context,
the first as a chat completion of the task's prompt, each later one as a completion of the previous
sequence's own text plus the chat template's user turn (``TurnTemplate``), so the final node holds
every reply's tokens exactly as generated and the env's messages as masked tokens.

The exchange is recorded on a real verifiers ``Trace``; when it closes the task's own rubric scores
it (``Task.score``: its ``@vf.reward``/``@vf.metric`` methods and plugged judges), then the env's
``finalize`` runs over the episode. The episode's score is the trace's weighted reward sum.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.errors import EpisodeFailed  # defined with the package's other errors
from atroposlib.interop.turns import NextTurn, TurnTemplate
from atroposlib.interop.verifiers.loading import LoadedTaskset, import_verifiers
from atroposlib.interop.verifiers.settings import VerifiersSettings
from atroposlib.runtime.failures import one_line
from atroposlib.utils.tokenize_for_trainer import chat_token_ids

logger = logging.getLogger(__name__)

# Why an episode was dropped (the run's drop counts name these).
KINDS = {
    "rubric": "the task's rubric raised",
    "env": "the verifiers env raised",
    "too_long": "the prompt is over max_token_length",
    "unmapped": "the env used a feature atroposlib does not map",
}


class _SamplingFailed(Exception):
    """Carries an inference error through the verifiers env's code back to our loop unchanged."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class Played:
    """A scored episode: its sequence, the rubric's signals and how it ended."""

    tokens: list[int]
    masks: list[int]
    logprobs: list[float]
    messages: list[dict[str, str]]
    reward: float
    rewards: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    turns: int = 0
    note: str = ""
    extended_every_turn: bool = True


def _text(content: Any) -> str:
    vf = import_verifiers()
    return str(vf.types.content_text(content)) if not isinstance(content, str) else content


def _message(vf: Any, m: Any) -> Any:
    """A turn's message as verifiers' typed message (env code may write plain dicts)."""
    if not isinstance(m, dict):
        return m
    kinds = {"user": vf.UserMessage, "system": vf.SystemMessage, "assistant": vf.AssistantMessage}
    kind = kinds.get(m.get("role", "user"))
    if kind is None:
        raise EpisodeFailed("unmapped", f"a turn's message has role {m.get('role')!r}")
    return kind(content=m.get("content") or "")


class PolicyInteraction:
    """Our side of ``Interaction``: ``turn``, ``trace`` and ``close`` as verifiers' envs use them."""

    def __init__(self, game: EpisodeGame, task: Any, managed: Any) -> None:
        vf = import_verifiers()
        self._vf, self._game, self._task, self._managed = vf, game, task, managed
        self.trace = vf.Trace(
            task=vf.TraceTask(
                type=type(task).__name__, data=task.data, key=task.key, hash=task.hash
            ),
            agent=vf.AgentInfo(config=game.loaded.seat_config, name=game.loaded.seat),
        )
        self.messages: list[dict[str, str]] = []
        self._prompted = task.data.prompt is not None
        self._started = self._over = self._stopped = self._closed = False
        self.turns = 0
        self.node: Any = None
        self.nodes = 0
        self.note = ""
        if task.data.system_prompt:
            self._add(vf.SystemMessage(content=task.data.system_prompt))
        prompt = task.data.prompt
        if isinstance(prompt, str):
            self._add(vf.UserMessage(content=prompt))
        elif prompt is not None:
            for m in prompt:
                self._add(m)

    def _add(self, message: Any, sampled: bool = False) -> None:
        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        node = self._vf.MessageNode(parent=parent, message=message, sampled=sampled)
        self.trace.nodes.append(node)
        self.messages.append({"role": message.role, "content": _text(message.content)})

    def _end(self, why: str) -> Any:
        self._over = True
        self.note = self.note or why
        return self._vf.Segment(messages=[], terminated=True)

    async def turn(self, message: Any = None) -> Any:
        """Send ``message`` (text or messages) as the user's turn and sample one reply."""
        vf, game = self._vf, self._game
        if self._closed or self._over:
            raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
        prompted = not self._started and self._prompted
        if message is None and not prompted:
            raise ValueError("nothing to run a turn on: this exchange takes its next user message")
        if message is not None and prompted:
            raise ValueError("the task's prompt opens this exchange: take its first reply first")
        self._started = True
        new: list[Any] = []
        if isinstance(message, str):
            new = [vf.UserMessage(content=message)]
        elif message is not None:
            new = [_message(vf, m) for m in message]
        for m in new:
            self._add(m)
        if self._stopped:
            return self._end("stopped by the task's @vf.stop")
        if self.turns >= game.max_turns:
            self.trace.stop("max_turns")
            return self._end(f"cut after max_turns={game.max_turns}")
        reply = await self._sample("\n\n".join(_text(m.content) for m in new))
        if reply is None:
            return self._end(f"cut: no room under max_token_length {game.max_token_length}")
        self._add(vf.AssistantMessage(content=reply), sampled=True)
        self.turns += 1
        self._stopped = await game.should_stop(self._task, self.trace)
        return vf.Segment(messages=[vf.AssistantMessage(content=reply)])

    async def _sample(self, user_text: str) -> Optional[str]:
        game, tok = self._game, self._game.tokenizer
        try:
            if self.node is None:
                room = game.max_token_length - len(chat_token_ids(tok, self.messages, True))
                if room < 1:
                    raise EpisodeFailed("too_long", f"{1 - room} token(s) over max_token_length")
                completion = await self._managed.chat_completion(
                    messages=self.messages,
                    n=1,
                    max_tokens=min(game.settings.max_tokens_per_turn, room),
                    temperature=game.temperature,
                )
                reply = completion.choices[0].message.content or ""
            else:
                turn = NextTurn.after(self.node, game.template, user_text, game.max_token_length)
                if turn is None:
                    return None
                reply = await turn.sample(
                    self._managed, game.settings.max_tokens_per_turn, game.temperature
                )
        except EpisodeFailed:
            raise
        except Exception as e:  # noqa: BLE001 - our server's failure, not the env's: re-raised as is
            raise _SamplingFailed(e) from e
        nodes = self._managed.get_state()["nodes"]
        self.node, self.nodes = nodes[-1], len(nodes)
        return reply

    async def close(self) -> Any:
        """End the exchange and score it with the task's rubric (once)."""
        if self._closed:
            return self.trace
        self._closed = True
        if self.trace.stop_condition is None:
            self.trace.stop("user_closed")
        self.trace.is_completed = True
        try:
            await self._task.score(self.trace)
        except Exception as e:  # noqa: BLE001 - the rubric's own failure drops this episode
            cause = e.__cause__ or e
            raise EpisodeFailed("rubric", one_line(cause)) from None
        unscored = [k for k, v in self.trace.rewards.items() if v is None]
        if unscored:
            raise EpisodeFailed("rubric", f"reward(s) {', '.join(unscored)} gave no score")
        self.trace.ok = True
        return self.trace


class PolicySeat:
    """The env's agent seat, played by our policy (``agents.<seat>``)."""

    trainable = True

    def __init__(self, game: EpisodeGame) -> None:
        self._game = game

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any) -> AsyncIterator[PolicyInteraction]:
        game = self._game
        if game.interaction is not None:
            raise EpisodeFailed("unmapped", "the env opened a second exchange in one episode")
        async with game.server.managed_server(tokenizer=game.tokenizer) as managed:
            it = PolicyInteraction(game, task, managed)
            game.interaction = it
            yield it
            await it.close()

    async def run(self, task: Any) -> Any:
        async with self.interaction(task) as it:
            await it.turn()
        return it.trace


class _Agents:
    """``agents`` as the env's ``setup``/``run`` address it: one seat, by its name."""

    def __init__(self, name: str, seat: PolicySeat) -> None:
        self._name, self._seat = name, seat

    def __getattr__(self, name: str) -> PolicySeat:
        if name == self.__dict__.get("_name"):
            return self.__dict__["_seat"]
        raise AttributeError(
            f"no agent {name!r}; this env declares [{self.__dict__.get('_name')!r}]"
        )


class EpisodeGame:
    """Plays one episode of a task through the verifiers env (``play``)."""

    def __init__(
        self,
        loaded: LoadedTaskset,
        server: Any,
        tokenizer: Any,
        template: TurnTemplate,
        settings: VerifiersSettings,
        max_token_length: int,
        temperature: float,
        warned: set[str],
    ) -> None:
        self.loaded, self.server, self.tokenizer = loaded, server, tokenizer
        self.template, self.settings = template, settings
        self.max_token_length, self.temperature = max_token_length, temperature
        seat_turns = loaded.seat_config.max_turns
        self.max_turns = min(settings.max_turns, seat_turns or settings.max_turns)
        self.interaction: Optional[PolicyInteraction] = None
        self._warned = warned

    async def should_stop(self, task: Any, trace: Any) -> bool:
        """The task's ``@vf.stop`` predicates over the trace (ones that need a request or a
        response, which only verifiers' own interception sees, are skipped with a warning)."""
        vf = import_verifiers()
        from verifiers.v1.utils.decorators import invoke

        for fn in task.hooks("stop"):
            try:
                result = invoke(fn, {"trace": trace, "task": task.data, vf.Trace: trace})
                if inspect.isawaitable(result):
                    result = await result
            except TypeError as e:
                if fn.__name__ not in self._warned:
                    self._warned.add(fn.__name__)
                    logger.warning("@vf.stop %s is not mapped (ignored): %s", fn.__name__, e)
                continue
            if result:
                trace.stop(fn.__name__)
                return True
        return False

    async def play(self, task: Any) -> Played:
        vf = import_verifiers()
        env = self.loaded.env
        agents = _Agents(self.loaded.seat, PolicySeat(self))
        try:
            await env.setup(agents)
            await env.run(task, agents)
        except _SamplingFailed as e:
            raise e.error from None
        except EpisodeFailed:
            raise
        except Exception as e:  # noqa: BLE001 - the env's own code failed this episode
            raise EpisodeFailed("env", f"{type(env).__name__}.run(): {one_line(e)}") from None
        it = self.interaction
        if it is None:
            raise EpisodeFailed("env", f"{type(env).__name__}.run() ran no agent")
        if not it._closed:
            await it.close()
        if it.node is None:
            raise EpisodeFailed("env", f"{type(env).__name__}.run() sampled no reply")
        trace = it.trace
        episode = vf.Episode(
            task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key),
            traces=[trace],
        )
        try:
            await env.finalize(task, episode)
        except Exception as e:  # noqa: BLE001
            raise EpisodeFailed("env", f"{type(env).__name__}.finalize(): {one_line(e)}") from None
        rewards = {k: r.value for k, r in trace.rewards.items() if r is not None}
        metrics = {k: float(v) for k, v in trace.metrics.items() if v is not None}
        node = it.node
        return Played(
            tokens=list(node.tokens),
            masks=list(node.masked_tokens),
            logprobs=list(node.logprobs),
            messages=it.messages,
            reward=float(trace.reward),
            rewards=rewards,
            metrics=metrics,
            turns=it.turns,
            note=it.note or (trace.stop_condition or ""),
            extended_every_turn=it.nodes == 1,
        )


__all__ = ["KINDS", "EpisodeFailed", "EpisodeGame", "Played", "PolicyInteraction", "PolicySeat"]

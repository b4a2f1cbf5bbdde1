"""One OpenEnv episode played by the policy through a managed server (exact tokens for every turn).

``reset`` (with the item's seed) gives the first observation, the user turn; each model reply is one
``step`` whose action carries the reply in ``action_field``; the observation that comes back is the next
user turn, until the env says ``done`` or ``max_turns`` steps were taken. The whole episode runs in one
``managed_server`` context and every later prompt extends the previous sequence's own text, so the
final node holds every turn's tokens exactly as generated (special tokens included), the observations
in between as masked (-100) tokens in the chat template's user turns, and the inference logprobs.
The final observation (after ``done``) is not part of the sequence: nothing is generated after it. A turn's token budget is
``max_tokens_per_turn``, capped by the room left under ``max_token_length``.

MCP tools (``tools``): when the server offers tools at reset, the first prompt lists them (the chat
template's ``tools=``); a reply with ``<tool_call>`` blocks is not a step: its calls run on the server
and their results come back as one masked tool turn (the template's tool role), and the model goes on;
a reply without a call is the step's action as usual. Each tool turn counts against ``max_turns``.

``TurnTemplate`` and ``require_exact_tokens`` live in ``atroposlib.interop.turns`` (shared with the
verifiers episodes); they are importable from here as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.interop.openenv.client import EpisodeError, OpenEnvSession, StepResult
from atroposlib.interop.openenv.observation import observation_text
from atroposlib.interop.openenv.settings import OpenEnvSettings
from atroposlib.interop.openenv.tools import ServerTools, ToolOutcome, list_tools, run_tool_calls
from atroposlib.interop.turns import NextTurn, TurnTemplate, require_exact_tokens


@dataclass
class Episode:
    """A played episode: its sequence, the env's rewards and how it ended."""

    tokens: list[int]
    masks: list[int]
    logprobs: list[float]
    messages: list[dict[str, str]]
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    turns: int = 0
    note: str = ""
    extended_every_turn: bool = True  # False: a later prompt did not extend the earlier tokens
    tool_calls: int = 0
    tool_errors: dict[str, int] = field(default_factory=dict)  # per kind of tools.TOOL_ERRORS

    def score(self, how: str) -> float:
        if not self.rewards:
            return 0.0
        return self.rewards[-1] if how == "last" else float(sum(self.rewards))


def _user_turn(result: StepResult, settings: OpenEnvSettings) -> str:
    try:
        return observation_text(result.observation, settings.observation_field)
    except KeyError:
        fields = ", ".join(sorted(result.observation)) or "none"
        raise EpisodeError(
            "malformed",
            f"the observation has no field {settings.observation_field!r} "
            f"(--openenv.observation_field; its fields: {fields})",
        ) from None


def _tool_template(
    tokenizer: Any, system: str | None, user: TurnTemplate, tools: Optional[ServerTools]
) -> TurnTemplate:
    """The turn that carries tool results: the template's tool role, or a user turn where the
    template does not render a tool message verbatim."""
    if tools is None:
        return user
    try:
        return TurnTemplate(tokenizer, system, role="tool")
    except Exception:  # noqa: BLE001 - no tool role in this template
        return user


@dataclass
class _Opening:
    """An episode right after ``reset``: its first messages, its tools and the first prompt."""

    messages: list[dict[str, str]]
    tools: Optional[ServerTools]
    tool_template: TurnTemplate
    first_prompt: str  # the rendered conversation, with the tools
    room: int  # tokens left for the first reply under max_token_length


async def _open(
    session: OpenEnvSession,
    tokenizer: Any,
    settings: OpenEnvSettings,
    template: TurnTemplate,
    seed: int,
    max_token_length: int,
) -> _Opening:
    """Reset with ``seed``, ask for the server's tools, render the first prompt (``EpisodeError``
    when the reset is already done or the first prompt does not fit)."""
    first = await session.reset(seed=seed, **settings.reset_args)
    if first.done:
        raise EpisodeError("empty", f"reset with seed {seed} answered done=true")
    tools = await list_tools(session) if settings.tools else None
    tool_template = _tool_template(tokenizer, settings.system_prompt, template, tools)
    messages: list[dict[str, str]] = []
    if settings.system_prompt:
        messages.append({"role": "system", "content": settings.system_prompt})
    messages.append({"role": "user", "content": _user_turn(first, settings)})
    first_prompt = tokenizer.apply_chat_template(
        messages,
        tools=tools.specs if tools is not None else None,
        tokenize=False,
        add_generation_prompt=True,
    )
    room = max_token_length - len(tokenizer.encode(first_prompt, add_special_tokens=False))
    if room < 1:
        raise EpisodeError("too_long", f"{1 - room} token(s) over max_token_length")
    return _Opening(messages, tools, tool_template, first_prompt, room)


_Answer = tuple[str, str, TurnTemplate]  # what comes back for a reply: text, role, its template


class _EpisodeTurns:
    """The turns of one opened episode in one managed session: a reply, what comes back for it
    (tool results or the step's observation), the next reply, until done or cut."""

    def __init__(
        self,
        session: OpenEnvSession,
        managed: Any,
        settings: OpenEnvSettings,
        template: TurnTemplate,
        opening: _Opening,
        max_token_length: int,
        temperature: float,
    ) -> None:
        self.session, self.managed, self.settings = session, managed, settings
        self.template, self.opening = template, opening
        self.max_token_length, self.temperature = max_token_length, temperature
        self.messages = opening.messages
        self.rewards: list[float] = []
        self.done, self.turns, self.note = False, 0, ""
        self.tool_calls, self.tool_errors = 0, dict[str, int]()

    async def play(self) -> None:
        """Every turn of the episode; its outcome is on ``self`` (``episode`` reads it)."""
        reply = await self._first_reply()
        while True:
            self.messages.append({"role": "assistant", "content": reply})
            self.turns += 1
            node = self.managed.get_state()["nodes"][-1]
            answer = await self._answer(reply)
            if answer is None:
                return
            if self.turns >= self.settings.max_turns:
                self.note = f"cut after max_turns={self.settings.max_turns}"
                return
            text, role, turn_template = answer
            turn = NextTurn.after(node, turn_template, text, self.max_token_length)
            if turn is None:
                self.note = (
                    f"cut: no room for another turn under max_token_length {self.max_token_length}"
                )
                return
            self.messages.append({"role": role, "content": text})
            reply = await turn.sample(
                self.managed, self.settings.max_tokens_per_turn, self.temperature
            )

    async def _first_reply(self) -> str:
        """The first reply: a chat completion of the messages, or, when the server offers tools, a
        completion of the prompt rendered with them."""
        opening = self.opening
        max_tokens = min(self.settings.max_tokens_per_turn, opening.room)
        if opening.tools is None:
            completion = await self.managed.chat_completion(
                messages=self.messages, n=1, max_tokens=max_tokens, temperature=self.temperature
            )
            return str(completion.choices[0].message.content or "")
        out = await self.managed.completion(  # the rendered prompt with the tools, as text
            prompt=opening.first_prompt, n=1, max_tokens=max_tokens, temperature=self.temperature
        )
        return str(out.choices[0].text or "")

    async def _answer(self, reply: str) -> Optional[_Answer]:
        """The results of ``reply``'s tool calls as a tool turn, else the observation its step
        gave as a user turn; None when that step ended the episode."""
        tools = self.opening.tools
        outcomes = await run_tool_calls(self.session, tools, reply) if tools is not None else None
        if outcomes is not None:
            self._count_tool_calls(outcomes)
            return "\n".join(o.text for o in outcomes), "tool", self.opening.tool_template
        s = self.settings
        result = await self.session.step({**s.action_extra, s.action_field: reply})
        if result.reward is not None:
            self.rewards.append(result.reward)
        if result.done:
            self.done, self.note = True, "done"
            return None
        return _user_turn(result, s), "user", self.template

    def _count_tool_calls(self, outcomes: list[ToolOutcome]) -> None:
        self.tool_calls += len(outcomes)
        for o in outcomes:
            if o.error is not None:
                self.tool_errors[o.error] = self.tool_errors.get(o.error, 0) + 1

    def episode(self, nodes: list[Any]) -> Episode:
        """The played episode, from the managed session's sequences (the last holds every turn)."""
        node = nodes[-1]
        return Episode(
            tokens=list(node.tokens),
            masks=list(node.masked_tokens),
            logprobs=list(node.logprobs),
            messages=self.messages,
            rewards=self.rewards,
            done=self.done,
            turns=self.turns,
            note=self.note,
            extended_every_turn=len(nodes) == 1,
            tool_calls=self.tool_calls,
            tool_errors=self.tool_errors,
        )


async def play_episode(
    server: Any,
    tokenizer: Any,
    settings: OpenEnvSettings,
    seed: int,
    max_token_length: int,
    temperature: float,
) -> Episode:
    """Play one episode; ``EpisodeError`` when the OpenEnv server fails it (see ``client.KINDS``).

    The first turn is a chat completion of the rendered conversation; each later prompt is the
    previous sequence's own text plus ``TurnTemplate.continuation`` (the feedback as a user turn), so
    the managed server extends the previous tokens verbatim and tokenizes only the new turn."""
    template = TurnTemplate(tokenizer, settings.system_prompt)
    async with OpenEnvSession(
        settings.url,
        connect_timeout=settings.connect_timeout,
        message_timeout=settings.message_timeout,
    ) as session:
        opening = await _open(session, tokenizer, settings, template, seed, max_token_length)
        async with server.managed_server(tokenizer=tokenizer) as managed:
            turns = _EpisodeTurns(
                session, managed, settings, template, opening, max_token_length, temperature
            )
            await turns.play()
            nodes = managed.get_state()["nodes"]
    return turns.episode(nodes)


def episode_messages(ep: Episode, score: float) -> list[dict[str, str]]:
    """The episode's conversation plus a closing line with its rewards (for reports)."""
    summary = f"score {score:g} from rewards {ep.rewards} after {ep.turns} turn(s); {ep.note}"
    return [*ep.messages, {"role": "grader", "content": summary}]


__all__ = [
    "Episode",
    "TurnTemplate",
    "episode_messages",
    "play_episode",
    "require_exact_tokens",
]

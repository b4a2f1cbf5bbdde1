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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.managed_server import dummy_allowed
from atroposlib.interop.openenv.client import EpisodeError, OpenEnvSession, StepResult
from atroposlib.interop.openenv.observation import observation_text
from atroposlib.interop.openenv.settings import OpenEnvSettings
from atroposlib.interop.openenv.tools import ServerTools, list_tools, run_tool_calls
from atroposlib.utils.tokenize_for_trainer import render_chat


def require_exact_tokens(server: Any, what: str) -> None:
    """A multi-turn episode is trained on the token ids the policy generated: an inference server type
    that cannot return them (the plain OpenAI API) is a ``ConfigError``, unless the dummy managed server
    is allowed (``ATROPOS_ALLOW_DUMMY_MANAGED_SERVER``)."""
    if not server.supports_tokens and not dummy_allowed():
        raise ConfigError(
            f"{what} episodes are trained on exact token ids, which this inference server type "
            "cannot return: use --openai.server_type vllm (also our engine) or sglang"
        )


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


class TurnTemplate:
    """The chat template's text between an assistant reply and the next generation: what closes the
    reply, opens a user turn, and opens the next assistant turn. Found once by rendering a
    conversation with marker contents, so the replies themselves are never re-rendered."""

    _REPLY, _USER = "\x00REPLY\x00", "\x00USER\x00"

    def __init__(self, tokenizer: Any, system: str | None, role: str = "user") -> None:
        msgs = [{"role": "system", "content": system}] if system else []
        msgs += [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": self._REPLY},
            {"role": role, "content": self._USER},
        ]
        text = render_chat(tokenizer, msgs, add_generation_prompt=True)
        if text.count(self._REPLY) != 1 or text.count(self._USER) != 1:
            raise ValueError(
                f"the chat template does not render assistant and {role} turns verbatim"
            )
        after_reply = text.split(self._REPLY, 1)[1]
        self.between, self.after = after_reply.split(self._USER, 1)
        self.tokenizer = tokenizer

    @classmethod
    def checked(cls, tokenizer: Any, system: str | None, tokenizer_name: str) -> TurnTemplate:
        """The template, or a ``ConfigError`` naming ``--env.tokenizer_name`` when the tokenizer has
        no chat template or one that rewrites turns."""
        try:
            return cls(tokenizer, system)
        except Exception as e:  # noqa: BLE001 - no chat template, or one that rewrites turns
            raise ConfigError(
                f"--env.tokenizer_name {tokenizer_name}: its chat template cannot render a "
                f"multi-turn episode ({e})"
            ) from None

    def continuation(self, generated: list[int], user_text: str) -> str:
        """Text that follows the generated tokens up to the next generation. Where the reply ended
        with the template's own end-of-turn token, only the rest of the closing text follows."""
        closing = self.between
        if generated:
            last = self.tokenizer.decode([generated[-1]], skip_special_tokens=False)
            if last and closing.startswith(last):
                closing = closing[len(last) :]
        return closing + user_text + self.after


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
        first = await session.reset(seed=seed, **settings.reset_args)
        if first.done:
            raise EpisodeError("empty", f"reset with seed {seed} answered done=true")
        tools: Optional[ServerTools] = await list_tools(session) if settings.tools else None
        tool_template = _tool_template(tokenizer, settings.system_prompt, template, tools)
        messages: list[dict[str, str]] = []
        if settings.system_prompt:
            messages.append({"role": "system", "content": settings.system_prompt})
        messages.append({"role": "user", "content": _user_turn(first, settings)})
        rewards: list[float] = []
        done, turns, note = False, 0, ""
        tool_calls, tool_errors = 0, dict[str, int]()
        first_prompt = tokenizer.apply_chat_template(
            messages,
            tools=tools.specs if tools else None,
            tokenize=False,
            add_generation_prompt=True,
        )
        room = max_token_length - len(tokenizer.encode(first_prompt, add_special_tokens=False))
        if room < 1:
            raise EpisodeError("too_long", f"{1 - room} token(s) over max_token_length")
        async with server.managed_server(tokenizer=tokenizer) as managed:
            if tools is None:
                completion = await managed.chat_completion(
                    messages=messages,
                    n=1,
                    max_tokens=min(settings.max_tokens_per_turn, room),
                    temperature=temperature,
                )
                reply = completion.choices[0].message.content or ""
            else:  # the rendered prompt with the tools, as text
                first_out = await managed.completion(
                    prompt=first_prompt,
                    n=1,
                    max_tokens=min(settings.max_tokens_per_turn, room),
                    temperature=temperature,
                )
                reply = first_out.choices[0].text or ""
            while True:
                messages.append({"role": "assistant", "content": reply})
                turns += 1
                node = managed.get_state()["nodes"][-1]
                outcomes = await run_tool_calls(session, tools, reply) if tools else None
                if outcomes is not None:
                    tool_calls += len(outcomes)
                    for o in outcomes:
                        if o.error is not None:
                            tool_errors[o.error] = tool_errors.get(o.error, 0) + 1
                    feedback, role, turn_template = (
                        "\n".join(o.text for o in outcomes),
                        "tool",
                        tool_template,
                    )
                else:
                    result = await session.step(
                        {**settings.action_extra, settings.action_field: reply}
                    )
                    if result.reward is not None:
                        rewards.append(result.reward)
                    if result.done:
                        done, note = True, "done"
                        break
                    feedback, role, turn_template = _user_turn(result, settings), "user", template
                if turns >= settings.max_turns:
                    note = f"cut after max_turns={settings.max_turns}"
                    break
                user = feedback
                generated = node.tokens[node.metadata["prompt_length"] :]
                more = turn_template.continuation(generated, user)
                room = (
                    max_token_length
                    - len(node.tokens)
                    - len(tokenizer.encode(more, add_special_tokens=False))
                )
                if room < 1:
                    note = (
                        f"cut: no room for another turn under max_token_length {max_token_length}"
                    )
                    break
                messages.append({"role": role, "content": user})
                out = await managed.completion(
                    prompt=node.full_text + more,
                    n=1,
                    max_tokens=min(settings.max_tokens_per_turn, room),
                    temperature=temperature,
                )
                reply = out.choices[0].text or ""
            nodes = managed.get_state()["nodes"]
            node = nodes[-1]
    return Episode(
        tokens=list(node.tokens),
        masks=list(node.masked_tokens),
        logprobs=list(node.logprobs),
        messages=messages,
        rewards=rewards,
        done=done,
        turns=turns,
        note=note,
        extended_every_turn=len(nodes) == 1,
        tool_calls=tool_calls,
        tool_errors=tool_errors,
    )


def episode_messages(ep: Episode, score: float) -> list[dict[str, str]]:
    """The episode's conversation plus a closing line with its rewards (for reports)."""
    summary = f"score {score:g} from rewards {ep.rewards} after {ep.turns} turn(s); {ep.note}"
    return [*ep.messages, {"role": "grader", "content": summary}]


__all__ = ["Episode", "TurnTemplate", "episode_messages", "play_episode"]

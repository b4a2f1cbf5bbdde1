"""One OpenEnv episode played by the policy through a managed server (exact tokens for every turn).

``reset`` (with the item's seed) gives the first observation, the user turn; each model reply is one
``step`` whose action carries the reply in ``action_field``; the observation that comes back is the next
user turn, until the env says ``done`` or ``max_turns`` steps were taken. The whole episode runs in one
``managed_server`` context and every later prompt extends the previous sequence's own text, so the
final node holds every turn's tokens exactly as generated (special tokens included), the observations
in between as masked (-100) tokens in the chat template's user turns, and the inference logprobs.
The final observation (after ``done``) is not part of the sequence: nothing is generated after it. A turn's token budget is
``max_tokens_per_turn``, capped by the room left under ``max_token_length``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atroposlib.interop.openenv.client import EpisodeError, OpenEnvSession, StepResult
from atroposlib.interop.openenv.observation import observation_text
from atroposlib.interop.openenv.settings import OpenEnvSettings
from atroposlib.utils.tokenize_for_trainer import chat_token_ids, render_chat


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

    def __init__(self, tokenizer: Any, system: str | None) -> None:
        msgs = [{"role": "system", "content": system}] if system else []
        msgs += [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": self._REPLY},
            {"role": "user", "content": self._USER},
        ]
        text = render_chat(tokenizer, msgs, add_generation_prompt=True)
        if text.count(self._REPLY) != 1 or text.count(self._USER) != 1:
            raise ValueError("the chat template does not render assistant and user turns verbatim")
        after_reply = text.split(self._REPLY, 1)[1]
        self.between, self.after = after_reply.split(self._USER, 1)
        self.tokenizer = tokenizer

    def continuation(self, generated: list[int], user_text: str) -> str:
        """Text that follows the generated tokens up to the next generation. Where the reply ended
        with the template's own end-of-turn token, only the rest of the closing text follows."""
        closing = self.between
        if generated:
            last = self.tokenizer.decode([generated[-1]], skip_special_tokens=False)
            if last and closing.startswith(last):
                closing = closing[len(last) :]
        return closing + user_text + self.after


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
        messages: list[dict[str, str]] = []
        if settings.system_prompt:
            messages.append({"role": "system", "content": settings.system_prompt})
        messages.append({"role": "user", "content": _user_turn(first, settings)})
        rewards: list[float] = []
        done, turns, note = False, 0, ""
        room = max_token_length - len(chat_token_ids(tokenizer, messages, True))
        if room < 1:
            raise EpisodeError("too_long", f"{1 - room} token(s) over max_token_length")
        async with server.managed_server(tokenizer=tokenizer) as managed:
            completion = await managed.chat_completion(
                messages=messages,
                n=1,
                max_tokens=min(settings.max_tokens_per_turn, room),
                temperature=temperature,
            )
            reply = completion.choices[0].message.content or ""
            while True:
                messages.append({"role": "assistant", "content": reply})
                turns += 1
                node = managed.get_state()["nodes"][-1]
                result = await session.step({**settings.action_extra, settings.action_field: reply})
                if result.reward is not None:
                    rewards.append(result.reward)
                if result.done:
                    done, note = True, "done"
                    break
                if turns >= settings.max_turns:
                    note = f"cut after max_turns={settings.max_turns}"
                    break
                user = _user_turn(result, settings)
                generated = node.tokens[node.metadata["prompt_length"] :]
                more = template.continuation(generated, user)
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
                messages.append({"role": "user", "content": user})
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
    )


def episode_messages(ep: Episode, score: float) -> list[dict[str, str]]:
    """The episode's conversation plus a closing line with its rewards (for reports)."""
    summary = f"score {score:g} from rewards {ep.rewards} after {ep.turns} turn(s); {ep.note}"
    return [*ep.messages, {"role": "grader", "content": summary}]


__all__ = ["Episode", "TurnTemplate", "episode_messages", "play_episode"]

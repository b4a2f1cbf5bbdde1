"""Exact-token multi-turn episodes, the part every standard shares (OpenEnv and verifiers episodes).

A multi-turn episode runs in one ``managed_server`` context: after the first reply, every prompt is the
previous sequence's own text (``node.full_text``) plus the chat template's closing of the reply and the
next turn (``TurnTemplate.continuation``), so the managed server reuses the earlier tokens verbatim
(special tokens the model generated included) and tokenizes only the new turn. ``NextTurn`` is that
prompt with the room left under ``max_token_length``; ``require_exact_tokens`` refuses an inference
server type that cannot return the token ids this needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from atroposlib.errors import ConfigError
from atroposlib.inference_clients.managed_server import dummy_allowed
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


@dataclass
class NextTurn:
    """The prompt of a later turn (the previous sequence's text plus the new turn) and its room."""

    prompt: str
    room: int  # tokens left under max_token_length for the reply

    @classmethod
    def after(
        cls, node: Any, template: TurnTemplate, text: str, max_token_length: int
    ) -> Optional[NextTurn]:
        """The turn that follows ``node`` (the managed server's last sequence) with ``text`` in
        ``template``'s turn; None when not one reply token would fit under ``max_token_length``."""
        generated = node.tokens[node.metadata["prompt_length"] :]
        more = template.continuation(generated, text)
        more_tokens = len(template.tokenizer.encode(more, add_special_tokens=False))
        room = max_token_length - len(node.tokens) - more_tokens
        if room < 1:
            return None
        return cls(node.full_text + more, room)

    async def sample(self, managed: Any, max_tokens_per_turn: int, temperature: float) -> str:
        """One reply to this prompt through the managed server (at most ``max_tokens_per_turn``)."""
        out = await managed.completion(
            prompt=self.prompt,
            n=1,
            max_tokens=min(max_tokens_per_turn, self.room),
            temperature=temperature,
        )
        return str(out.choices[0].text or "")


__all__ = ["NextTurn", "TurnTemplate", "require_exact_tokens"]

"""``ServerHarness`` (Atropos's test double): a server that answers scripted responses.

Register what to answer with ``set_desired_response(messages, chat_completion)``,
``set_desired_completion(prompt, completion)`` or ``set_tokens_and_logprobs_response(...)``; a
request nothing was scripted for raises ``KeyError`` naming the missing key. ``create_chat_completion``
and ``create_completion`` build the OpenAI objects. For tests of env code only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.inference_clients.limits import WeightedSemaphore
from atroposlib.utils.openai_shapes import AnswerKind, openai_choice, openai_response


def _answer(
    kind: AnswerKind,
    resp_strings: Sequence[str],
    finish_reason: Optional[Sequence[str]],
    model: str,
) -> dict[str, Any]:
    reasons = list(finish_reason or ["stop"] * len(resp_strings))
    choices = [openai_choice(kind, i, text, reasons[i]) for i, text in enumerate(resp_strings)]
    return openai_response(kind, model, choices)


def create_chat_completion(
    resp_strings: Sequence[str],
    finish_reason: Optional[Sequence[str]] = None,
    model: str = "test_model",
) -> ChatCompletion:
    return ChatCompletion.model_validate(
        _answer("chat.completion", resp_strings, finish_reason, model)
    )


def create_completion(
    resp_strings: Sequence[str],
    finish_reason: Optional[Sequence[str]] = None,
    model: str = "test_model",
) -> Completion:
    return Completion.model_validate(_answer("text_completion", resp_strings, finish_reason, model))


class ServerHarness:
    """Scripted answers keyed by the conversation (chat) or prompt (completion)."""

    supports_tokens = True
    server_healthy = True

    def __init__(self) -> None:
        self.response_map: dict[str, Any] = {}
        self.tokens_and_logprobs_map: dict[str, tuple] = {}
        self.sem = WeightedSemaphore(1)
        self.eval_sem = WeightedSemaphore(1)

    @staticmethod
    def conv_to_dictkey(input_message: Sequence[dict[str, Any]]) -> str:
        return "\n".join(f"role:{m['role']}\ncontent:{m['content']}" for m in input_message)

    async def update_weight(self, weight: float) -> None:
        return None

    def set_desired_response(self, input_message: Sequence[dict], desired: ChatCompletion) -> None:
        self.response_map[self.conv_to_dictkey(input_message)] = desired

    def set_desired_completion(self, input_message: str, completion: Completion) -> None:
        self.response_map[input_message] = completion

    def set_tokens_and_logprobs_response(
        self,
        prompt: str,
        prompt_tokens: list,
        output_tokens_list: list,
        output_logprobs_list: list,
        finish_reasons: list,
    ) -> None:
        self.tokens_and_logprobs_map[prompt] = (
            prompt_tokens,
            output_tokens_list,
            output_logprobs_list,
            finish_reasons,
        )

    def _lookup(self, table: dict, key: str) -> Any:
        if key not in table:
            raise KeyError(f"ServerHarness has no scripted response for key:\n{key}")
        return table[key]

    async def chat_completion(self, **kwargs: Any) -> ChatCompletion:
        return self._lookup(self.response_map, self.conv_to_dictkey(kwargs["messages"]))

    async def completion(self, **kwargs: Any) -> Completion:
        return self._lookup(self.response_map, kwargs["prompt"])

    async def tokens_and_logprobs_completion(self, **kwargs: Any) -> tuple:
        key = kwargs.get("prompt")
        if key is None and "input_ids" in kwargs:
            key = next(
                (k for k, v in self.tokens_and_logprobs_map.items() if v[0] == kwargs["input_ids"]),
                str(kwargs["input_ids"]),
            )
        return self._lookup(self.tokens_and_logprobs_map, str(key))

    async def close(self) -> None:
        return None


__all__ = ["ServerHarness", "create_chat_completion", "create_completion"]

"""The one builder of OpenAI-shaped answers: what it writes parses as the ``openai`` client's types."""

from __future__ import annotations

from openai.types.chat.chat_completion import ChatCompletion
from openai.types.completion import Completion

from atroposlib.utils.openai_shapes import openai_choice, openai_response, token_usage


def test_a_text_completion_answer_parses_as_an_openai_completion():
    choices = [openai_choice("text_completion", i, t, "stop") for i, t in enumerate(["a", "bc"])]
    body = openai_response("text_completion", "tiny", choices, token_usage(3, 2))
    parsed = Completion.model_validate(body)
    assert [(c.index, c.text, c.finish_reason) for c in parsed.choices] == [
        (0, "a", "stop"),
        (1, "bc", "stop"),
    ]
    assert (parsed.object, parsed.model, body["id"][:5]) == ("text_completion", "tiny", "cmpl-")
    assert parsed.usage is not None and parsed.usage.total_tokens == 5


def test_a_chat_answer_holds_assistant_messages_and_extra_fields():
    choice = openai_choice("chat.completion", 0, "hi", "length", token_ids=[5, 6])
    body = openai_response("chat.completion", "tiny", [choice])
    parsed = ChatCompletion.model_validate(body)
    assert parsed.choices[0].message.role == "assistant"
    assert (parsed.choices[0].message.content, parsed.choices[0].finish_reason) == ("hi", "length")
    assert choice["token_ids"] == [5, 6] and choice["logprobs"] is None
    assert "usage" not in body and body["id"].startswith("chatcmpl-")
    # a message that only calls tools has no content
    assert openai_choice("chat.completion", 0, None, "tool_calls")["message"]["content"] is None


def test_extra_fields_replace_the_default_logprobs_and_ids_are_fresh():
    lps = {"content": []}
    assert openai_choice("chat.completion", 0, "x", "stop", logprobs=lps)["logprobs"] is lps
    first, second = (openai_response("chat.completion", "m", []) for _ in range(2))
    assert first["id"] != second["id"]

"""``stream: true``: the proxy's answer as server-sent events in OpenAI's ``chat.completion.chunk``
shapes, and the rule that a stream the client did not take to its end is not trained.

The backend call is token-in/token-out and not streamed (the managed server records whole
generations), so the stream starts once the backend has generated the reply; its chunks are then
what OpenAI sends: per choice, ``delta: {"role": "assistant", "content": ""}``, the content in one
piece per generated token (pieces that add up to exactly the non-streaming ``content``; with
``logprobs: true`` each piece carries its tokens' logprobs), each tool call as OpenAI streams it
(``index``, ``id``, ``type`` and the function's ``name`` with empty ``arguments``, then the
arguments), and a last chunk with an empty ``delta`` and the ``finish_reason`` (and the reply's
``tool_call_errors``, when some block did not parse). ``stream_options.include_usage`` adds
``"usage": null`` to those chunks and a last one with ``"choices": []`` and the usage. The stream
ends with ``data: [DONE]``. Chunks are JSON with every non-ASCII character escaped, so no client's
line splitting can cut one.

``delivered_stream`` yields the events and calls ``on_undelivered`` when it is closed before its
last event went out (the client went away): the proxy then takes the request's nodes back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Optional

from atroposlib.inference_clients.proxy.reply_translation import generated_ids

MAX_DECODES = 512
"""Content pieces per choice at most (a long reply is cut into pieces of several tokens)."""


def content_pieces(
    tokenizer: Any, ids: list[int], content: Optional[str]
) -> list[tuple[str, int, int]]:
    """``(piece, first, end)``: ``content`` in pieces, each covering generated ids
    ``[first, end)``, found by decoding growing prefixes of ``ids``; the pieces add up to
    ``content`` (whatever no prefix accounts for goes in the last piece)."""
    if not content:
        return []
    pieces: list[tuple[str, int, int]] = []
    sent, start = 0, 0
    step = max(1, len(ids) // MAX_DECODES)
    for k in range(step, len(ids) + 1, step):
        text = tokenizer.decode(
            ids[:k], skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        common = 0
        for a, b in zip(text, content, strict=False):
            if a != b:
                break
            common += 1
        if common > sent and (common == len(text) or common == len(content)):
            pieces.append((content[sent:common], start, k))
            sent, start = common, k
    if sent < len(content):
        pieces.append((content[sent:], start, len(ids)))
    return pieces


def _event(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def _choice_events(
    head: dict[str, Any],
    choice: dict[str, Any],
    pieces: list[tuple[str, int, int]],
    with_usage: bool,
) -> list[str]:
    """The events of one choice of the answer (see the module docstring)."""
    index = choice["index"]
    lps = (choice.get("logprobs") or {}).get("content")

    def chunk(delta: dict[str, Any], finish: Optional[str] = None, logprobs: Any = None) -> str:
        body = {**head, "choices": [{"index": index, "delta": delta, "logprobs": logprobs}]}
        body["choices"][0]["finish_reason"] = finish
        if with_usage:
            body["usage"] = None
        return _event(body)

    out = [chunk({"role": "assistant", "content": ""})]
    for piece, first, end in pieces:
        out.append(chunk({"content": piece}, logprobs={"content": lps[first:end]} if lps else None))
    message = choice["message"]
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        named = {"name": fn["name"], "arguments": ""}
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": i, "id": call["id"], "type": "function", "function": named}
                    ]
                }
            )
        )
        out.append(
            chunk({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]})
        )
    last: dict[str, Any] = {}
    if message.get("tool_call_errors"):
        last["tool_call_errors"] = message["tool_call_errors"]
    out.append(chunk(last, finish=choice["finish_reason"]))
    return out


def stream_events(
    answer: dict[str, Any], result: Any, tokenizer: Any, include_usage: bool
) -> list[str]:
    """Every event of the stream of ``answer`` (the proxy's chat.completion for the managed
    server's ``result``), ``[DONE]`` last."""
    head = {
        "id": answer["id"],
        "object": "chat.completion.chunk",
        "created": answer["created"],
        "model": answer["model"],
    }
    events: list[str] = []
    for choice, raw in zip(answer["choices"], result.choices, strict=True):
        content = choice["message"].get("content")
        pieces = content_pieces(tokenizer, generated_ids(raw), content)
        events += _choice_events(head, choice, pieces, include_usage)
    if include_usage:
        events.append(_event({**head, "choices": [], "usage": answer["usage"]}))
    events.append("data: [DONE]\n\n")
    return events


async def delivered_stream(
    events: list[str], on_undelivered: Callable[[], None]
) -> AsyncIterator[str]:
    """Yield ``events``; ``on_undelivered()`` when closed before the last one went out."""
    delivered = False
    try:
        for event in events:
            yield event
        delivered = True
    finally:
        if not delivered:
            on_undelivered()


__all__ = ["MAX_DECODES", "content_pieces", "delivered_stream", "stream_events"]

"""Server-sent-event streams of the engine's completion and chat answers, shaped as vLLM sends them.

A streaming request is one engine job followed as it grows: the worker thread reports each row's new
tokens (``RowFollower``, a snapshot taken on the worker thread, so nothing mutable crosses threads) and
the event loop turns them into chunks. Text is decoded from all of a row's tokens so far and sent as the
part not yet sent, holding back a trailing incomplete character and, while the row may still hit a stop
string, the last ``len(longest stop) - 1`` characters; the final chunk carries the rest of the row's
final text, so the streamed pieces add up to the text a non-streaming call returns.

Chunks (one choice each, as vLLM sends them): chat opens every choice with ``delta: {role, content: ""}``
(``prompt_token_ids`` at the top level when ``return_token_ids``), then ``delta: {content}`` pieces;
completions send ``text`` pieces (``prompt_token_ids`` on a choice's first chunk). With
``return_token_ids`` every piece carries its ``token_ids``; the last piece of a choice has its
``finish_reason`` and ``stop_reason``. ``stream_options.include_usage`` adds a last chunk with empty
``choices`` and the ``usage``; ``continuous_usage_stats`` puts the running usage on every chunk. The
stream ends with ``data: [DONE]``; an error during generation is sent as ``data: {"error": ...}`` first.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from atroposlib.inference.generation import RowResult

Kind = Literal["chat", "completion"]


@dataclass
class RowDelta:
    """What one row added since the last report: new tokens, and how it ended once ``done``."""

    row: int
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    done: bool = False
    finish_reason: Optional[str] = None
    stop_reason: Optional[str] = None
    text: str = ""


class RowFollower:
    """The job's progress callback: runs on the worker thread, posts ``RowDelta`` lists to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, n_rows: int) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[list[RowDelta]] = asyncio.Queue()
        self._seen = [0] * n_rows
        self._finished = [False] * n_rows

    def __call__(self, results: Sequence[RowResult]) -> None:
        news: list[RowDelta] = []
        for i, res in enumerate(results):
            if self._finished[i]:
                continue
            a, b = self._seen[i], len(res.token_ids)
            if b == a and not res.done:
                continue
            self._seen[i] = b
            d = RowDelta(i, res.token_ids[a:b], res.logprobs[a:b], res.top_logprobs[a:b])
            if res.done:
                self._finished[i] = True
                d.done, d.finish_reason, d.stop_reason, d.text = (
                    True,
                    res.finish_reason,
                    res.stop_reason,
                    res.text,
                )
            news.append(d)
        if news:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, news)


@dataclass
class _RowState:
    prompt_ids: list[int]
    tokens: list[int] = field(default_factory=list)
    sent: str = ""
    text_offset: int = 0
    done: bool = False


def _hold(text: str, stop_hold: int) -> str:
    """The part of ``text`` that is safe to send while the row is still running."""
    end = len(text)
    while end and text[end - 1] == "\ufffd":  # an incomplete UTF-8 sequence: more bytes to come
        end -= 1
    return text[: max(0, end - stop_hold)]


@dataclass
class StreamSpec:
    """What a stream needs to know about its request."""

    kind: Kind
    model: str
    prompts: list[list[int]]  # one per prompt; rows are prompt-major (prompt i, sample j at i*n+j)
    n: int
    decode: Callable[[list[int]], str]
    token_text: Callable[[int], str]
    stop: list[str] = field(default_factory=list)
    logprobs: Optional[int] = None  # completions: top-k (0 = chosen token only); chat: top_logprobs
    return_token_ids: bool = False
    include_usage: bool = False
    continuous_usage: bool = False


class ChunkStream:
    """Turns a job's ``RowDelta`` reports into vLLM-shaped SSE lines."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        prefix = "chatcmpl" if spec.kind == "chat" else "cmpl"
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.object = "chat.completion.chunk" if spec.kind == "chat" else "text_completion"
        self.rows = [
            _RowState(spec.prompts[r // spec.n]) for r in range(len(spec.prompts) * spec.n)
        ]
        self.stop_hold = max((len(s) for s in spec.stop), default=1) - 1

    # -- envelope ---------------------------------------------------------------------------
    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.spec.model,
            "choices": choices,
        }
        body.update(extra)
        return f"data: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n"

    def _usage(self, row: Optional[int] = None) -> dict[str, int]:
        if row is None:
            prompt = sum(len(p) for p in self.spec.prompts)
            completion = sum(len(r.tokens) for r in self.rows)
        else:
            prompt, completion = len(self.rows[row].prompt_ids), len(self.rows[row].tokens)
        return {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }

    def _extra(self, row: int) -> dict[str, Any]:
        return {"usage": self._usage(row)} if self.spec.continuous_usage else {}

    # -- pieces -----------------------------------------------------------------------------
    def opening(self) -> list[str]:
        """Chat's first chunk of every choice: the assistant role and empty content."""
        if self.spec.kind != "chat":
            return []
        prompt = self.spec.prompts[0]
        out = []
        for i in range(self.spec.n):
            choice = {
                "index": i,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
            extra: dict[str, Any] = {
                "prompt_token_ids": list(prompt) if self.spec.return_token_ids else None,
                "prompt_text": None,
            }
            if self.spec.continuous_usage:
                extra["usage"] = {
                    "prompt_tokens": len(prompt),
                    "total_tokens": len(prompt),
                    "completion_tokens": 0,
                }
            out.append(self._chunk([choice], **extra))
        return out

    def piece(self, d: RowDelta) -> Optional[str]:
        """The chunk for one row's news (None when there is nothing to say)."""
        st = self.rows[d.row]
        if st.done:
            return None
        first = not st.tokens
        st.tokens += d.token_ids
        if d.done:
            st.done = True
            delta = d.text[len(st.sent) :]  # the sent text is always a prefix of the final one
        else:
            safe = _hold(self.spec.decode(st.tokens), self.stop_hold)
            delta = safe[len(st.sent) :] if safe.startswith(st.sent) else ""
        if not delta and not d.token_ids and not d.done:
            return None
        st.sent += delta
        ids = list(d.token_ids) if self.spec.return_token_ids else None
        if self.spec.kind == "chat":
            choice: dict[str, Any] = {
                "index": d.row,
                "delta": {"content": delta},
                "logprobs": self._chat_logprobs(d),
                "finish_reason": d.finish_reason if d.done else None,
            }
            if d.done:
                choice["stop_reason"] = d.stop_reason
            choice["token_ids"] = ids
        else:
            choice = {
                "index": d.row,
                "text": delta,
                "logprobs": self._completion_logprobs(d, st),
                "finish_reason": d.finish_reason if d.done else None,
                "stop_reason": d.stop_reason if d.done else None,
                "prompt_token_ids": list(st.prompt_ids)
                if first and self.spec.return_token_ids
                else None,
                "token_ids": ids,
            }
        return self._chunk([choice], **self._extra(d.row))

    def _chat_logprobs(self, d: RowDelta) -> Optional[dict[str, Any]]:
        k = self.spec.logprobs
        if k is None:
            return None
        text = self.spec.token_text
        content = []
        for pos, (tid, lp) in enumerate(zip(d.token_ids, d.logprobs, strict=True)):
            alts = d.top_logprobs[pos] if pos < len(d.top_logprobs) else []
            t = text(tid)
            content.append(
                {
                    "token": t,
                    "logprob": lp,
                    "bytes": list(t.encode("utf-8")),
                    "top_logprobs": [
                        {"token": text(a), "logprob": alp, "bytes": list(text(a).encode("utf-8"))}
                        for a, alp in alts[:k]
                    ],
                }
            )
        return {"content": content}

    def _completion_logprobs(self, d: RowDelta, st: _RowState) -> Optional[dict[str, Any]]:
        k = self.spec.logprobs
        if k is None:
            return None
        tokens = [self.spec.token_text(t) for t in d.token_ids]
        offsets = []
        for t in tokens:
            offsets.append(st.text_offset)
            st.text_offset += len(t)
        return {
            "text_offset": offsets,
            "token_logprobs": list(d.logprobs),
            "tokens": tokens,
            "top_logprobs": [
                {self.spec.token_text(tid): lp for tid, lp in alts} for alts in d.top_logprobs
            ]
            if k > 0
            else None,
        }

    def usage_chunk(self) -> Optional[str]:
        return self._chunk([], usage=self._usage()) if self.spec.include_usage else None

    @staticmethod
    def error(message: str, kind: str = "InternalServerError", code: int = 500) -> str:
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        return f"data: {json.dumps(body)}\n\n"

    def all_done(self) -> bool:
        return all(r.done for r in self.rows)


async def sse_events(
    stream: ChunkStream,
    follower: RowFollower,
    finished: asyncio.Future,
    abort: Callable[[], None],
) -> AsyncIterator[str]:
    """The SSE lines of one streaming request; aborts the job if the consumer stops reading early."""
    completed = False
    try:
        for line in stream.opening():
            yield line
        while not stream.all_done():
            if follower.queue.empty():
                if finished.done():  # the job ended without reporting every row
                    exc = None if finished.cancelled() else finished.exception()
                    yield stream.error(f"generation failed: {exc}" if exc else "generation stopped")
                    break
                getter = asyncio.ensure_future(follower.queue.get())
                await asyncio.wait({getter, finished}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()  # an item it was woken for stays in the queue
                    continue
                batches = [getter.result()]
            else:
                batches = []
            while not follower.queue.empty():
                batches.append(follower.queue.get_nowait())
            for news in batches:
                for d in news:
                    piece = stream.piece(d)
                    if piece is not None:
                        yield piece
        else:
            usage = stream.usage_chunk()
            if usage is not None:
                yield usage
        yield "data: [DONE]\n\n"
        completed = True
    finally:
        if not completed:
            abort()


__all__ = ["ChunkStream", "RowDelta", "RowFollower", "StreamSpec", "sse_events"]

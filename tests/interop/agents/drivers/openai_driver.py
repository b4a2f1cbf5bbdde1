"""Conformance checks of the ``openai`` client (sync, async, streaming) against proxy sessions; run in
the ``openai`` framework's Python (see ``driver_io``)."""

from __future__ import annotations

import asyncio
from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()

import openai  # noqa: E402
from agent_io import CALCULATOR_SCHEMA  # noqa: E402


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=config["api_key"], max_retries=0)


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def example(config: dict[str, Any], url: str) -> dict[str, Any]:
    from openai_calculator import solve

    return {"answer": solve(task(config, url, "What is 6 * 7? [script:calc]"))}


def plain(config: dict[str, Any], url: str) -> dict[str, Any]:
    parts = [{"type": "text", "text": "hi"}, {"type": "text", "text": "[script:plain]"}]
    out = client(url).chat.completions.create(
        model=config["model"], messages=[{"role": "user", "content": parts}], stop="\n\n\n"
    )
    return {"content": out.choices[0].message.content, "usage": out.usage.model_dump()}


def n2(config: dict[str, Any], url: str) -> dict[str, Any]:
    out = client(url).chat.completions.create(
        model=config["model"], messages=ask("hi [script:two]"), n=2, max_completion_tokens=200
    )
    return {"contents": [c.message.content for c in out.choices]}


def stream(config: dict[str, Any], url: str) -> dict[str, Any]:
    chunks = list(
        client(url).chat.completions.create(
            model=config["model"],
            messages=ask("What is 6 * 7? [script:calc]"),
            tools=[CALCULATOR_SCHEMA],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    names = [
        d.function.name
        for c in chunks
        if c.choices
        for d in (c.choices[0].delta.tool_calls or [])
        if d.function and d.function.name
    ]
    usage = chunks[-1].usage
    return {"chunks": len(chunks), "names": names, "usage": usage.model_dump() if usage else None}


def parallel(config: dict[str, Any], url: str) -> dict[str, Any]:
    c = client(url)
    messages = ask("Two sums please [script:parallel]")
    first = c.chat.completions.create(
        model=config["model"],
        messages=messages,
        tools=[CALCULATOR_SCHEMA],
        parallel_tool_calls=True,
    )
    message = first.choices[0].message
    messages.append(
        message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
    )
    for call, result in zip(message.tool_calls or [], ("42", "4"), strict=False):
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = c.chat.completions.create(
        model=config["model"], messages=messages, tools=[CALCULATOR_SCHEMA]
    )
    return {"calls": len(message.tool_calls or []), "answer": second.choices[0].message.content}


def null_content(config: dict[str, Any], url: str) -> dict[str, Any]:
    messages = [
        *ask("hi [script:plain]"),
        {"role": "assistant", "content": None},
        {"role": "user", "content": "again"},
    ]
    out = client(url).chat.completions.create(model=config["model"], messages=messages)
    return {"content": out.choices[0].message.content}


def asynchronous(config: dict[str, Any], url: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        c = openai.AsyncOpenAI(base_url=url, api_key=config["api_key"], max_retries=0)
        whole = await c.chat.completions.create(
            model=config["model"], messages=ask("hi [script:plain]")
        )
        pieces = []
        async for chunk in await c.chat.completions.create(
            model=config["model"], messages=ask("hi [script:plain]"), stream=True
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
        return {"content": whole.choices[0].message.content, "pieces": pieces}

    return asyncio.run(run())


def refusals(config: dict[str, Any], url: str) -> dict[str, Any]:
    c = client(url)
    seen = {}
    for name, call in (
        (
            "field",
            lambda: c.chat.completions.create(
                model=config["model"], messages=ask("x"), extra_body={"foo": 1}
            ),
        ),
        ("model", lambda: c.chat.completions.create(model="gpt-4o", messages=ask("x"))),
        (
            "session",
            lambda: client(url.rsplit("/", 2)[0] + "/nope/v1").chat.completions.create(
                model=config["model"], messages=ask("x")
            ),
        ),
    ):
        try:
            call()
            seen[name] = None
        except openai.APIStatusError as e:
            seen[name] = {"status": e.status_code, "class": type(e).__name__, "message": e.message}
    return seen


def vllm_greedy(config: dict[str, Any], url: str) -> dict[str, Any]:
    c = client(url)
    ask_once = {
        "model": config["model"],
        "messages": ask("hello"),
        "temperature": 0,
        "max_tokens": 24,
    }
    whole = c.chat.completions.create(**ask_once)
    pieces = [
        chunk.choices[0].delta.content or ""
        for chunk in c.chat.completions.create(**ask_once, stream=True)
        if chunk.choices
    ]
    return {
        "json": whole.choices[0].message.content,
        "stream": "".join(pieces),
        "pieces": len(pieces),
    }


def vllm_budget(config: dict[str, Any], url: str) -> dict[str, Any]:
    out = client(url).chat.completions.create(
        model=config["model"], messages=ask("hi"), temperature=0
    )
    return {
        "finish_reason": out.choices[0].finish_reason,
        **out.usage.model_dump(include={"prompt_tokens", "completion_tokens"}),
    }


def vllm_sampling(config: dict[str, Any], url: str) -> dict[str, Any]:
    c = client(url)
    asked = {
        "model": config["model"],
        "messages": ask("hi"),
        "n": 2,
        "seed": 7,
        "top_p": 0.9,
        "max_tokens": 16,
    }
    first, second = (c.chat.completions.create(**asked) for _ in range(2))
    return {
        "first": [ch.message.content for ch in first.choices],
        "second": [ch.message.content for ch in second.choices],
        "completion_tokens": first.usage.completion_tokens,
    }


def vllm_async(config: dict[str, Any], url: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        c = openai.AsyncOpenAI(base_url=url, api_key=config["api_key"], max_retries=0)
        stream = await c.chat.completions.create(
            model=config["model"],
            messages=ask("hi"),
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        return {"chunks": len(chunks), "completion_tokens": chunks[-1].usage.completion_tokens}

    return asyncio.run(run())


if __name__ == "__main__":
    run_checks(
        config,
        {
            "example": example,
            "plain": plain,
            "n2": n2,
            "stream": stream,
            "parallel": parallel,
            "null_content": null_content,
            "async": asynchronous,
            "refusals": refusals,
            "vllm_greedy": vllm_greedy,
            "vllm_budget": vllm_budget,
            "vllm_sampling": vllm_sampling,
            "vllm_async": vllm_async,
        },
    )

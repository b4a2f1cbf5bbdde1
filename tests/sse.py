"""Reading a server-sent-events body in tests, line by line, the way the OpenAI SDK does."""

from __future__ import annotations

from collections.abc import Iterator

import httpx


def sse_lines(response: httpx.Response) -> Iterator[str]:
    """The lines of an SSE body, split at ``\\n`` (a trailing ``\\r`` removed). Not ``iter_lines``:
    httpx splits there at every ``str.splitlines`` separator, U+2028 and U+0085 included, which vLLM and
    our engine leave raw inside a JSON string (a sampled token may be one); the OpenAI SDK splits bytes,
    as here."""
    pending = b""
    for chunk in response.iter_bytes():
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8")

"""The one rule for a base URL given to a command (``--api-url``, ``--openai.base_url``, ...).

A base URL is ``http://`` or ``https://``, a host name, an optional port (1-65535) and an optional
path, with no spaces. ``base_url_problem`` says what is wrong with one (None when nothing is), and
``base_url_error`` turns that into the one-line message every command prints, naming the flag and
the value: ``--api-url 'localhost:8000' must start with http:// or https:// (did you mean
'http://localhost:8000'?)``. It is a usage error (exit status 2). Whether the host exists or answers
is not checked here. ``with_openai_root`` completes an inference server's base URL given without
a path (``http://host:9001`` -> ``http://host:9001/v1``).
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit


def base_url_problem(url: str) -> Optional[str]:
    """What is wrong with ``url`` as an http(s) base URL, as the end of a sentence; None if nothing.
    Surrounding whitespace is ignored (callers strip it)."""
    text = url.strip()
    if any(c.isspace() for c in text):
        return "contains a space"
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not text.lower().startswith(
        ("http://", "https://")
    ):
        bare = text and "://" not in text and not text.lower().startswith(("http:", "https:"))
        hint = f" (did you mean 'http://{text}'?)" if bare else ""
        return "must start with http:// or https://" + hint
    try:
        port = parts.port
    except ValueError:
        return "has an invalid port (use a number from 1 to 65535)"
    if not parts.hostname:
        return "has no host name"
    if port is not None and port == 0:
        return "has an invalid port (use a number from 1 to 65535)"
    return None


def base_url_error(url: str, flag: str) -> Optional[str]:
    """The one-line message for ``url`` given as ``flag`` when it is not a base URL, else None."""
    problem = base_url_problem(url)
    return f"{flag} {url.strip()!r} {problem}" if problem else None


def check_base_url(url: str) -> str:
    """``url`` stripped, or ``ValueError`` saying what is wrong (for pydantic field validators)."""
    problem = base_url_problem(url)
    if problem:
        raise ValueError(problem)
    return url.strip()


def with_openai_root(url: str) -> str:
    """``url`` with ``/v1`` appended when it has no path at all (``http://host:9001``): that is where
    OpenAI-compatible servers (vLLM, SGLang, TRL's, our engine, api.openai.com) answer, and what the
    ``openai`` client expects a base URL to name. A URL with any path is left as it is."""
    text = url.strip()
    if urlsplit(text).path.strip("/") or urlsplit(text).query:
        return text
    return text.rstrip("/") + "/v1"


__all__ = ["base_url_error", "base_url_problem", "check_base_url", "with_openai_root"]

"""Start-up checks of an env command's URLs: what cannot be right is an error before anything runs.

A URL that breaks ``utils.urls``'s rule (no ``http://`` / ``https://``, no host, a bad port) or
whose host name does not exist (the resolver says so, ``EAI_NONAME``) can never work; retrying it
would only wait. A resolver that cannot answer right now
(``EAI_AGAIN``) is not an error here: the command's own retries and deadline handle it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from typing import Any, Optional
from urllib.parse import urlsplit

from atroposlib.utils.urls import base_url_error

logger = logging.getLogger(__name__)

_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def url_problem(url: str, flag: str) -> Optional[str]:
    """Why ``url`` (given as ``flag``) cannot work, or None."""
    if not url:
        return None
    syntax = base_url_error(url, flag)
    if syntax:
        return syntax
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    try:
        socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror as e:
        if e.errno in _NO_SUCH_HOST:
            return f"{flag} {url!r}: host {host!r} does not exist (the name does not resolve)"
        logger.warning("could not resolve %s for %s right now (%s); will retry", host, flag, e)
    except (UnicodeError, ValueError) as e:
        return f"{flag} {url!r} is not a valid URL ({e})"
    return None


def _server_urls(servers: Any) -> Iterable[str]:
    items = servers if isinstance(servers, list) else [servers]
    for s in items:
        url = getattr(s, "base_url", None)
        if url:
            yield url


def check_urls(subcommand: str, env_config: Any, servers: Any) -> Optional[str]:
    """The first problem among the URLs ``subcommand`` will use, or None."""
    if subcommand == "serve":
        problem = url_problem(env_config.rollout_server_url, "--env.rollout_server_url")
        if problem:
            return problem
    for url in _server_urls(servers):
        problem = url_problem(url, "--openai.base_url")
        if problem:
            return problem
    return None


__all__ = ["check_urls", "url_problem"]

"""``atropos-proxy --base-url URL``: the managed-server proxy in front of an inference server, so that
agent programs that only speak OpenAI's chat API train through it (also ``python -m
atroposlib.cli.proxy``; docs/interop.md, "Bring your own agent").

The flags are ``ProxySettings``'s fields (``atroposlib.utils.settings_cli``), each also an
``ATROPOS_PROXY_*`` environment variable (the key as ``ATROPOS_PROXY_API_KEY``: a flag shows in
``ps``). The port is bound first, then the backend is asked what it serves (up to
``--backend-wait`` seconds), then the tokenizer is loaded. A bad value, a port that is taken, a
backend that does not answer or a tokenizer that does not load is one line and exit status 2;
listening beyond loopback without a key prints a warning, as run-api does.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from atroposlib.errors import AtroposError
from atroposlib.inference_clients.proxy.settings import ENV_PREFIX, ProxySettings
from atroposlib.utils.cli import CliParser, fail, non_negative_int
from atroposlib.utils.net import cannot_listen, listening_socket
from atroposlib.utils.settings_cli import Flag, add_model_arguments, model_values

PROG = "atropos-proxy"
FLAGS = {"base_url": Flag("--base-url", repeat=True)}


def build_parser() -> argparse.ArgumentParser:
    p = CliParser(
        prog=PROG,
        description="OpenAI-compatible proxy whose sessions record every generation token-exactly "
        "for training (agent programs point their client at {proxy}/{session}/v1).",
    )
    add_model_arguments(p, ProxySettings, flags=FLAGS, env_prefix=ENV_PREFIX)
    p.add_argument(
        "--backend-wait",
        type=non_negative_int,
        default=60,
        help="seconds to wait for the backend's /v1/models at start-up (default: 60)",
    )
    return p


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def exposure_warning(settings: ProxySettings) -> Optional[str]:
    """The warning for a proxy reachable beyond this machine without a key, else None."""
    if settings.api_key or is_loopback(settings.host):
        return None
    return (
        f"{PROG}: warning: listening on {settings.host} without a key ({ENV_PREFIX}API_KEY): "
        "anyone who can reach this port can generate on the backend and read every session"
    )


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = ProxySettings.from_env(**model_values(args, ProxySettings))
    except AtroposError as e:
        return fail(PROG, e)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per backend request otherwise
    try:
        sock = listening_socket(settings.host, settings.port)
    except OSError as e:
        return fail(PROG, cannot_listen(settings.host, settings.port, e))
    try:
        from atroposlib.inference_clients.proxy.serve import build_proxy

        app, model = build_proxy(settings, backend_wait_s=float(args.backend_wait))
    except AtroposError as e:
        sock.close()
        return fail(PROG, e)
    warning = exposure_warning(settings)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    import uvicorn

    sock.listen(2048)
    port = sock.getsockname()[1]
    print(
        f"{PROG}: serving {model.name} from {', '.join(settings.base_url)} on "
        f"http://{settings.host}:{port} (auth={'on' if settings.api_key else 'off'}, "
        f"max_sessions={settings.max_sessions}, idle timeout {settings.session_idle_timeout:g} s)",
        flush=True,
    )
    config = uvicorn.Config(
        app, host=settings.host, port=port, log_level=settings.log_level, access_log=False
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python my_env.py serve-openenv --port P [--env.* ...]``: any Atropos env served to OpenEnv clients.

The env file needs no change: ``serve-openenv`` is a subcommand plugin (entry point group
``atroposlib.env_subcommands``) that ``MyEnv.cli()`` finds. Its own flags: ``--port`` (8000),
``--host`` (127.0.0.1), ``--max-sessions`` (8 episodes at once), ``--action-field`` (``message``);
every other flag is the env's (``--env.*``, ``--config``), loaded as for ``serve``. The env is built and
set up once, with ``group_size`` 1 (an OpenEnv episode is one rollout) and the OpenEnv client as its
model (``client_replies``); ``--openai.*`` flags are accepted and unused.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, NoReturn

from atroposlib.errors import AtroposError, ConfigError, ModelLoadError
from atroposlib.interop.openenv.client_replies import ReplyServerManager
from atroposlib.interop.openenv.serve_app import create_openenv_app
from atroposlib.runtime.config_loader import HelpRequested, load_config

logger = logging.getLogger(__name__)

OWN_FLAGS = {"port": 8000, "host": "127.0.0.1", "max-sessions": 8, "action-field": "message"}
HELP = """serve-openenv: serve this env as an OpenEnv environment (WebSocket /ws, openenv's protocol)

  --port P                 port to listen on (default: 8000)
  --host H                 address to bind (default: 127.0.0.1)
  --max-sessions N         episodes open at once; more get CAPACITY_REACHED (default: 8)
  --action-field NAME      the action field that carries the reply (default: message)

reset starts a rollout of the env's next item; each model call of the rollout is an observation
(prompt, messages) and the client's step action is the model's reply; the env's score is the reward
of the final step (done). Every --env.* flag and --config work as for `serve` (see `serve --help`)."""


def _fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def split_own_flags(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """This subcommand's flags (typed like their defaults) and the rest (the env's)."""
    own: dict[str, Any] = dict(OWN_FLAGS)
    rest: list[str] = []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].removeprefix("--").partition("=")
        if argv[i].startswith("--") and name in OWN_FLAGS:
            if not eq:
                if i + 1 >= len(argv):
                    raise ConfigError(f"--{name} needs a value")
                value, i = argv[i + 1], i + 1
            if isinstance(OWN_FLAGS[name], int):
                if not value.strip().lstrip("-").isdigit():
                    raise ConfigError(f"--{name}: {value!r} is not a whole number")
                own[name] = int(value)
            else:
                own[name] = value
        else:
            rest.append(argv[i])
        i += 1
    if not 0 < own["port"] < 65536:
        raise ConfigError(f"--port {own['port']} is not a port")
    if own["max-sessions"] < 1:
        raise ConfigError("--max-sessions must be at least 1")
    return own, rest


async def _serve(env: Any, own: dict[str, Any]) -> None:
    import uvicorn

    await env.setup()
    app = create_openenv_app(env, own["max-sessions"], own["action-field"])
    config = uvicorn.Config(app, host=own["host"], port=own["port"], log_level="warning")
    logger.info(
        "%s served as an OpenEnv environment on ws://%s:%d/ws",
        type(env).__name__,
        own["host"],
        own["port"],
    )
    await uvicorn.Server(config).serve()


def main(env_cls: Any, argv: list[str]) -> None:
    """The ``serve-openenv`` subcommand of ``env_cls`` with the arguments after it."""
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        raise SystemExit(0)
    try:
        own, rest = split_own_flags(list(argv))
        loaded = load_config(env_cls, "serve", rest)
        loaded.env.group_size = 1
    except HelpRequested as h:
        print(str(h))
        raise SystemExit(0) from None
    except ConfigError as e:
        _fail(str(e))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        env = env_cls(config=loaded.env, server_configs=loaded.servers)
    except (ConfigError, ModelLoadError) as e:
        _fail(str(e))
    env.server = ReplyServerManager(env.tokenizer)
    try:
        asyncio.run(_serve(env, own))
    except ConfigError as e:
        _fail(str(e))
    except AtroposError as e:
        _fail(str(e), code=1)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


__all__ = ["main", "split_own_flags"]

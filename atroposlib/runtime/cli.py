"""``MyEnv.cli()``: the ``serve`` / ``process`` / ``evaluate`` subcommands of an environment file.

``main(env_cls)`` loads the configuration (``config_loader``), checks the URLs (``preflight``),
builds the env and runs the subcommand (``runner.serve``, ``process.process``,
``evaluation.run_evaluate``).

User mistakes (bad flag, bad value, missing file, unloadable tokenizer, a URL without ``http://`` or
with a host that does not exist) print one ``error:`` line and exit 2, without a traceback. A run
that could not do its job (``RunFailed``: nothing produced, every attempt failed, a permanent server
error) prints its one-line summary and exits 1 (the rule of every command: ``atroposlib.utils.cli``).
``--help`` after a subcommand lists every option with its default.
Installed packages may add subcommands (``subcommand_plugins``, e.g. ``serve-openenv``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, Optional, cast

from atroposlib.errors import AtroposError, ConfigError, ModelLoadError
from atroposlib.runtime.config_loader import (
    SUBCOMMANDS,
    HelpRequested,
    load_config,
    missing_groups_path,
)
from atroposlib.runtime.context import EnvClass, EnvRuntime
from atroposlib.runtime.evaluation import run_evaluate
from atroposlib.runtime.preflight import check_urls, url_problem
from atroposlib.runtime.process import process
from atroposlib.runtime.runner import serve
from atroposlib.runtime.subcommand_plugins import find_plugin, plugin_names
from atroposlib.utils.progress import quiet_library_bars

_RUNS: dict[str, Callable[[EnvRuntime], Coroutine[Any, Any, None]]] = {
    "serve": serve,
    "process": process,
    "evaluate": run_evaluate,
}
_DESCRIPTIONS = {
    "serve": "register with the trajectory API and feed the trainer",
    "process": "generate groups locally to a JSONL file + HTML report (no API needed)",
    "evaluate": "run the env's evaluate() and write metrics.json / samples.jsonl",
}


def usage(env_cls: EnvClass) -> str:
    lines = [f"usage: {env_cls.__name__} {{{','.join(SUBCOMMANDS)}}} [options]", "", "subcommands:"]
    lines += [f"  {name:<9} {_DESCRIPTIONS[name]}" for name in SUBCOMMANDS]
    lines += [f"  {name:<9} (from an installed plugin)" for name in plugin_names()]
    lines += ["", f"`{env_cls.__name__} <subcommand> --help` lists every option."]
    return "\n".join(lines)


def banner(sub: str, total_steps: int, group_size: int) -> str:
    """What the command will do, in its own terms: ``total_steps`` counts groups for ``process``
    and trainer steps for ``serve`` (-1: the trainer's ``num_steps``); ``evaluate`` ignores it."""
    if sub == "process":
        return f"{total_steps} group(s) of {group_size}"
    if sub == "serve":
        until = "the trainer's num_steps" if total_steps == -1 else f"trainer step {total_steps}"
        return f"groups of {group_size} until {until}"
    return "running evaluate()"


def _fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def main(env_cls: EnvClass, argv: Optional[list[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(env_cls))
        raise SystemExit(0 if args else 2)
    sub, rest = args[0], args[1:]
    quiet_library_bars()  # in a log file, no tokenizer/model download bars
    plugin = None if sub in SUBCOMMANDS else find_plugin(sub)
    if plugin is not None:
        plugin(env_cls, rest)
        return
    try:
        loaded = load_config(env_cls, sub, rest)
    except HelpRequested as h:
        print(str(h))
        raise SystemExit(0) from None
    except ConfigError as e:
        _fail(str(e))
    problem = missing_groups_path(loaded) if sub == "process" else None
    problem = problem or (None if loaded.testing else check_urls(sub, loaded.env, loaded.servers))
    for ns, configs in loaded.extra_servers.items():
        items = configs if isinstance(configs, list) else [configs]
        for cfg in items:
            problem = problem or url_problem(getattr(cfg, "base_url", "") or "", f"--{ns}.base_url")
    if problem:
        _fail(problem)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for notice in loaded.notices:
        logging.getLogger(__name__).warning(notice)
    try:
        extra = {f"{ns}_server_configs": c for ns, c in loaded.extra_servers.items()}
        env: EnvRuntime = cast(Any, env_cls)(  # extra server groups: keywords it declared
            config=loaded.env,
            server_configs=loaded.servers,
            slurm=loaded.slurm,
            testing=loaded.testing,
            **extra,
        )
    except (ConfigError, ModelLoadError) as e:
        _fail(str(e))
    logging.getLogger(__name__).info(
        "%s %s: %s; servers: %s",
        env_cls.__name__,
        sub,
        banner(sub, loaded.env.total_steps, loaded.env.group_size),
        ", ".join(s.config.base_url or s.config.server_type for s in env.server.servers),
    )
    try:
        asyncio.run(_RUNS[sub](env))
    except ConfigError as e:
        _fail(str(e))
    except AtroposError as e:
        _fail(str(e), code=1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


__all__ = ["banner", "main", "usage"]

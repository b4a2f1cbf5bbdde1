"""What every conformance driver shares (standard library only: a driver runs in its framework's own
Python). ``python DRIVER CONFIG.json`` runs the checks the config names, each against its own proxy
session, and prints one line ``REPORT {json}``: per check what the framework gave back, or the error
it raised. The config: ``checks`` (names), ``sessions`` (check -> session base URL), ``model``,
``api_key``, ``examples`` (the folder of the example agent programs, put on ``sys.path``)."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

Check = Callable[[dict[str, Any], str], dict[str, Any]]


def load_config() -> dict[str, Any]:
    with open(sys.argv[1], encoding="utf-8") as fh:
        config: dict[str, Any] = json.load(fh)
    sys.path.insert(0, config["examples"])
    return config


def task(config: dict[str, Any], url: str, question: str, max_tokens: int = 400) -> Any:
    """An example program's ``Task`` for ``question`` on session ``url``."""
    from agent_io import Task

    return Task(url, config["api_key"], config["model"], question, max_tokens)


def run_checks(config: dict[str, Any], checks: dict[str, Check]) -> None:
    report: dict[str, Any] = {}
    for name in config["checks"]:
        try:
            report[name] = checks[name](config, config["sessions"].get(name, ""))
        except Exception as e:  # noqa: BLE001 - the test reads the error by name
            report[name] = {
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-2000:],
            }
    print("\nREPORT " + json.dumps(report), flush=True)  # on its own line, whatever came before

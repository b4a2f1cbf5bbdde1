"""Conformance check of hermes-agent (its ``AIAgent``, which streams every request) against a proxy
session, with no patch; run in the ``hermes-agent`` framework's Python."""

from __future__ import annotations

from typing import Any

from driver_io import load_config, run_checks, task

config = load_config()

from hermes_calculator import solve  # noqa: E402


def run(config: dict[str, Any], url: str) -> dict[str, Any]:
    return {"answer": solve(task(config, url, "What is 6 * 7? [script:calc]"))}


if __name__ == "__main__":
    run_checks(config, {"run": run})

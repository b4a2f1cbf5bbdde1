"""Subcommands that packages add to every env file's command line (``python my_env.py NAME ...``).

A package declares one as an entry point in the group ``atroposlib.env_subcommands``: its name is the
subcommand, its object a callable ``(env_cls, argv_after_the_subcommand) -> None`` that does all the
work (flags, errors, exit codes). The runtime finds them by package metadata, so it never imports the
packages that sit above it (e.g. ``serve-openenv`` from ``atroposlib.interop``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Optional

GROUP = "atroposlib.env_subcommands"


def plugin_names() -> list[str]:
    """The names of the installed subcommand plugins."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def find_plugin(name: str) -> Optional[Callable[[Any, list[str]], None]]:
    """The plugin named ``name`` (loaded), or None."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            fn: Callable[[Any, list[str]], None] = ep.load()
            return fn
    return None


__all__ = ["GROUP", "find_plugin", "plugin_names"]

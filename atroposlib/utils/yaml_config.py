"""Reading a YAML config file into a mapping, with one-line ``ConfigError`` s for user mistakes.

Shared by the env CLI's config loader and the trainer's config, so both report a missing file, bad YAML
or a non-mapping top level the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import yaml

from atroposlib.errors import ConfigError


def _where(e: yaml.YAMLError) -> str:
    """`` at line L, column C (problem)`` from the parser's mark (1-based), else the first line."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if mark is None:
        return f" ({problem})"
    ctx, ctx_mark = getattr(e, "context", None), getattr(e, "context_mark", None)
    if ctx and ctx_mark is not None and ctx_mark is not mark:
        problem += f"; {ctx} started at line {ctx_mark.line + 1}"
    return f" at line {mark.line + 1}, column {mark.column + 1} ({problem})"


def load_yaml_mapping(path: Union[str, Path], flag: str = "--config") -> dict[str, Any]:
    """The YAML file at ``path`` as a dict (an empty file gives ``{}``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{flag}: no such file {str(path)!r}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{flag} {path}: not valid YAML{_where(e)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{flag} {path}: the top level must be a mapping of field: value")
    return data

"""Reading a YAML config file into a mapping, with one-line ``ConfigError`` s for user mistakes.

Shared by the env CLI's config loader and the trainer's config, so both report a missing file, bad YAML
or a non-mapping top level the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import yaml

from atroposlib.errors import ConfigError


def load_yaml_mapping(path: Union[str, Path], flag: str = "--config") -> dict[str, Any]:
    """The YAML file at ``path`` as a dict (an empty file gives ``{}``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{flag}: no such file {str(path)!r}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{flag} {path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{flag} {path}: the top level must be a mapping of field: value")
    return data

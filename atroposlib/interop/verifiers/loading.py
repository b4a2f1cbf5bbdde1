"""Load a verifiers v1 taskset in-process, with the env class it pairs with (``import verifiers`` is here).

``--verifiers.env`` names the taskset as verifiers' own loaders resolve it (an id: ``my-taskset``
imports ``my_taskset``, or a built-in under ``verifiers.v1.tasksets``), or as a dotted module path
(``pkg.tasks``) or a ``.py`` file, which verifiers' loaders do not take: those are imported here and
handed to them under a flat alias. ``--verifiers.args`` are
``--verifiers.args`` are validated against the taskset's own config class. The env class is the
taskset's exported ``Env`` subclass, else verifiers' single-agent env. Every mistake becomes a
``ConfigError`` of one line.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atroposlib.errors import ConfigError

INSTALL_HINT = "pip install 'atroposlib[verifiers]' (verifiers==0.4.0)"


def import_verifiers() -> Any:
    """``verifiers.v1``, or a ``ConfigError`` saying how to install it."""
    try:
        import verifiers.v1 as vf
    except ImportError as e:
        raise ConfigError(f"verifiers is not installed ({e}): {INSTALL_HINT}") from None
    return vf


def _pydantic_line(err: Any) -> str:
    """A pydantic ValidationError as one line: ``field: message; field: message``."""
    parts = []
    for e in err.errors():
        where = ".".join(str(p) for p in e.get("loc", ())) or "(config)"
        parts.append(f"{where}: {e.get('msg', '')}")
    return "; ".join(parts)


@dataclass
class LoadedTaskset:
    """A verifiers env (its taskset loaded) and the name of its one agent seat."""

    env: Any  # verifiers.v1.Env
    seat: str
    taskset_id: str

    @property
    def taskset(self) -> Any:
        return self.env.taskset

    @property
    def seat_config(self) -> Any:
        return self.env._agent_specs[self.seat]


def _plugin_id(name: str) -> str:
    """The id verifiers' loaders can import: ``name`` itself, or an alias of a dotted module or file."""
    if name.endswith(".py"):
        path = Path(name).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"--verifiers.env {name}: no such file")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        return path.stem
    if "." not in name or "/" in name or "@" in name:
        return name
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"--verifiers.env {name}: no such module ({e})") from None
    except Exception as e:  # noqa: BLE001 - the module itself failed to import
        raise ConfigError(
            f"--verifiers.env {name}: importing it raised {type(e).__name__}: {e}"
        ) from None
    alias = name.replace(".", "__")
    sys.modules.setdefault(alias, module)
    return alias


def load_taskset(name: str, args: dict[str, Any], flag: str = "--verifiers.args") -> LoadedTaskset:
    """The verifiers env of taskset ``name`` built with taskset config ``args``."""
    if not name.strip():
        raise ConfigError(
            "--verifiers.env is required (an installed taskset id or a module exporting a Taskset)"
        )
    import_verifiers()
    from pydantic import ValidationError
    from verifiers.v1.utils import loaders

    ident = _plugin_id(name)
    try:
        loaders.taskset_class(ident)
    except ModuleNotFoundError as e:
        missing = getattr(e, "name", None)
        wanted = ident.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()
        if missing and missing not in (wanted, f"verifiers.v1.tasksets.{wanted}"):
            raise ConfigError(
                f"--verifiers.env {name}: importing it failed: No module named {missing!r}"
            ) from None
        raise ConfigError(
            f"--verifiers.env {name}: no such taskset (no module {wanted!r} is installed, and "
            "verifiers has no built-in taskset of that name)"
        ) from None
    except (AttributeError, TypeError, ValueError) as e:
        raise ConfigError(f"--verifiers.env {name}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the taskset module itself failed to import
        raise ConfigError(
            f"--verifiers.env {name}: importing it raised {type(e).__name__}: {e}"
        ) from None
    try:
        config = loaders.resolve_env_config({"taskset": {**args, "id": ident}})
    except ValidationError as e:
        raise ConfigError(f"{flag}: {_pydantic_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - a config validator of the taskset raised
        raise ConfigError(f"{flag}: {type(e).__name__}: {e}") from None
    try:
        env = loaders.load_environment(config)
    except ValidationError as e:
        raise ConfigError(f"--verifiers.env {name}: {_pydantic_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - the taskset's or env's constructor raised
        raise ConfigError(
            f"--verifiers.env {name}: loading the taskset raised {type(e).__name__}: {e}"
        ) from None
    seats = list(env._agent_specs)
    if len(seats) != 1:
        raise ConfigError(
            f"--verifiers.env {name}: its env {type(env).__name__} has {len(seats)} agent seats "
            f"({', '.join(seats)}); only single-seat envs are trained through atroposlib"
        )
    return LoadedTaskset(env=env, seat=seats[0], taskset_id=name)


__all__ = ["INSTALL_HINT", "LoadedTaskset", "import_verifiers", "load_taskset"]

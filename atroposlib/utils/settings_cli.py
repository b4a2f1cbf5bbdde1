"""Command-line flags generated from a pydantic settings model, and parsed back into its values.

The one way a settings model becomes a command line: ``run-api`` (``ApiSettings``),
``atropos-serve-model`` (``EngineConfig``) and the trainer (``TrainingConfig``) all use it.

* ``add_model_arguments(parser, Model)`` adds one ``--kebab-case`` flag per field, its help the
  field's description and default. ``Literal`` fields get ``choices``, ``bool`` fields
  ``--x/--no-x``, list fields take several values. ``Flag`` overrides one field's flag where a
  command keeps another spelling (``--model`` for ``model_path``, a repeatable ``--cors-origin``).
* Absent flags stay absent from the namespace, so ``model_values(args, Model)`` is exactly what was
  given; the model's defaults (or the layers under the flags: a YAML file, environment variables)
  supply the rest. Values reach pydantic as the strings argparse read: the model converts and
  validates them, so a flag, a YAML key and an environment variable obey the same rules.
* ``format_validation_error`` turns pydantic's error into one line naming each bad field (or its
  flag), with a "did you mean" for an unknown field; ``error_message`` is one error's text without
  pydantic's "Value error, " prefix (the env config loader uses it too).
"""

from __future__ import annotations

import argparse
import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal, Optional

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Flag:
    """How one field appears on a command line, where the generated form does not fit."""

    name: Optional[str] = None  # the flag (default: ``--`` + the field name in kebab case)
    repeat: bool = False  # a list field given once per value (``--x a --x b``), not ``--x a b``


def flag_name(field: str, flags: Optional[Mapping[str, Flag]] = None) -> str:
    """The flag of ``field``: its ``Flag.name`` when given, else ``--kebab-case``."""
    spec = (flags or {}).get(field)
    if spec is not None and spec.name:
        return spec.name
    return "--" + field.replace("_", "-")


def _unwrap_optional(annotation: Any) -> Any:
    """``X`` for ``Optional[X]`` / ``X | None``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _metavar(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Annotated:  # a type with validators: its base type
        annotation = typing.get_args(annotation)[0]
    return getattr(annotation, "__name__", "VALUE").upper()


def _shown(value: Any) -> str:
    """A default as help shows it: paths as written, anything else as its repr."""
    return str(value) if isinstance(value, PurePath) else repr(value)


def add_model_arguments(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    flags: Optional[Mapping[str, Flag]] = None,
    require: bool = False,
    env_prefix: Optional[str] = None,
) -> None:
    """Add one flag per field of ``model`` (``dest`` is the field name, absent when not given).

    ``require``: fields without a default are required flags (leave it off when another layer,
    e.g. a YAML file, may supply them). ``env_prefix``: name each field's environment variable
    (``env_prefix`` + the upper-cased field name) in its help."""
    unknown = set(flags or {}) - set(model.model_fields)
    if unknown:
        raise ValueError(f"Flag given for fields {sorted(unknown)} that {model.__name__} lacks")
    for name, field in model.model_fields.items():
        spec = (flags or {}).get(name, Flag())
        ann = _unwrap_optional(field.annotation)
        required = field.is_required()
        notes = [f"env {env_prefix}{name.upper()}"] if env_prefix else []
        if required:
            notes.append("required")
        else:
            notes.append(f"default: {_shown(field.get_default(call_default_factory=True))}")
        help_txt = f"{field.description or ''} ({'; '.join(notes)})".strip().replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_txt}
        if require and required:
            kwargs["required"] = True
        origin = typing.get_origin(ann)
        if ann is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif origin is list:
            (item,) = typing.get_args(ann) or (str,)
            kwargs["metavar"] = _metavar(item)
            if spec.repeat:
                kwargs["action"] = "append"
            else:
                kwargs["nargs"] = "*"
        elif origin is Literal:
            kwargs["choices"] = [str(c) for c in typing.get_args(ann)]
        else:
            kwargs["metavar"] = _metavar(ann)
        parser.add_argument(flag_name(name, flags), **kwargs)


def model_values(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` given on the command line (flags that were absent are left out)."""
    return {k: v for k, v in vars(args).items() if k in model.model_fields}


def _known_fields(model: Optional[type[BaseModel]], path: tuple[Any, ...]) -> list[str]:
    """Field names of the (nested) model that holds ``path``'s last element."""
    cls = model
    for part in path:
        field = cls.model_fields.get(part) if cls is not None and isinstance(part, str) else None
        ann = field.annotation if field is not None else None
        cls = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return list(cls.model_fields) if cls is not None else []


# What pydantic puts before the text of an error raised by a validator: not part of the message.
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


def error_message(err: Mapping[str, Any]) -> str:
    """The text of one pydantic error (an item of ``ValidationError.errors()``), without the
    "Value error, " that pydantic puts before a validator's own message."""
    msg = str(err.get("msg", ""))
    for prefix in _VALIDATOR_PREFIXES:
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def format_validation_error(
    e: ValidationError,
    model: Optional[type[BaseModel]] = None,
    *,
    lead: str = "invalid config: ",
    flags: Optional[Mapping[str, Flag]] = None,
    as_flags: bool = False,
) -> str:
    """One line naming each bad field (``as_flags``: by its flag, e.g. ``--port``) and the value it
    got; an unknown field gets a "did you mean" when one is close."""
    parts = []
    for err in e.errors():
        path = [str(x) for x in err["loc"]]
        if as_flags and path:
            path[0] = flag_name(path[0], flags)
        loc = ".".join(path) or "config"
        text = f"{loc}: {error_message(err)}" + (f" (got {err['input']!r})" if err["loc"] else "")
        if err["type"] == "extra_forbidden" and err["loc"]:
            known = _known_fields(model, tuple(err["loc"][:-1]))
            close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1, cutoff=0.6)
            text = f"{loc}: unknown field" + (f"; did you mean {close[0]}?" if close else "")
        parts.append(text)
    return lead + "; ".join(parts)


__all__ = [
    "Flag",
    "add_model_arguments",
    "error_message",
    "flag_name",
    "format_validation_error",
    "model_values",
]

"""The ``--help`` text of an env's ``serve``/``process``/``evaluate``: every flag (general, ``--env.*``,
the env's sections, ``--openai.*`` and any other server namespace) with its description and the default
that applies to this env and subcommand. ``load_config`` computes the defaults; this module only lays
them out."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.runtime.config_sections import sections_of


def shown_default(value: Any) -> str:
    """A default as the user would type it: an enum's value, a string quoted."""
    if isinstance(value, Enum):
        return str(value.value)
    return repr(value) if isinstance(value, str) else str(value)


def _section_lines(env_model: type[BaseModel], env_values: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for sec, model in sections_of(env_model).items():
        current = env_values.get(sec)
        lines += ["", f"{sec} options (YAML: a mapping {sec}: under env:):"]
        for name, f in model.model_fields.items():
            default = getattr(current, name, None) if current is not None else f.default
            lines.append(
                f"  --{sec}.{name:<33} {f.description or ''} (default: {shown_default(default)})"
            )
    return lines


def render_help(
    program: str,
    subcommand: str,
    env_model: type[BaseModel],
    env_values: dict[str, Any],
    server_values: dict[str, Any],
    namespaces: Sequence[str] = (),
) -> str:
    """The help text. ``env_values`` are the env's defaults for this subcommand, ``server_values`` the
    first inference server's, ``namespaces`` the env's extra server namespaces (e.g. ``teacher``)."""
    lines = [
        f"usage: {program} {subcommand} [--config FILE.yaml] [--env.FIELD VALUE ...] "
        "[--openai.FIELD VALUE ...] [--slurm] [--testing]",
        "",
        "Layers: config_init() defaults < --config YAML (env:, openai:, slurm, testing) < flags.",
        "--openai.FIELD applies to every server; --openai.base_url a,b replaces the list (one server per URL).",
        "",
        "general:",
        "  --config FILE            YAML file with env:/openai:/slurm/testing keys (default: none)",
        "  --slurm                  distribute over SLURM inference nodes (default: False)",
        "  --testing                use a scripted in-process server instead of real ones (default: False)",
        "",
        "env options:",
    ]
    for name, f in env_model.model_fields.items():
        lines.append(
            f"  --env.{name:<36} {f.description or ''} (default: {shown_default(env_values.get(name))})"
        )
    lines += ["", "openai (inference server) options:"]
    for name, f in APIServerConfig.model_fields.items():
        value = server_values.get(name)
        shown = "***" if name == "api_key" and value else shown_default(value)
        lines.append(f"  --openai.{name:<33} {f.description or ''} (default: {shown})")
    for ns in namespaces:
        lines += [
            "",
            f"--{ns}.FIELD: the {ns} servers (same fields as --openai.FIELD; YAML key {ns}:)",
        ]
    return "\n".join([*lines, *_section_lines(env_model, env_values)])


__all__ = ["render_help", "shown_default"]

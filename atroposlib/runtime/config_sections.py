"""Config sections: env-config fields that are settings models get their own flag namespace.

An env config may group settings in a field whose type is a pydantic model (a *section*), e.g. the
OpenEnv env's ``openenv: OpenEnvSettings``. Each field of a section is a flag ``--<section>.<field>``
(``--openenv.url ws://...``), parsed with the same rules as ``--env.*``; in YAML the section is a mapping
under ``env:`` (``env: {openenv: {url: ...}}``). Layers merge field by field: the section's default <
YAML < flags, so a flag changes one field and keeps the others.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

RESERVED = ("env", "openai", "config", "slurm", "testing")


def sections_of(env_model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The env config's section fields: name -> settings model."""
    out: dict[str, type[BaseModel]] = {}
    for name, f in env_model.model_fields.items():
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and name not in RESERVED:
            out[name] = ann
    return out


def section_flags(env_model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every section flag (``"openenv.url"``) -> the section's model."""
    return {
        f"{sec}.{name}": model
        for sec, model in sections_of(env_model).items()
        for name in model.model_fields
    }


def merge_sections(
    merged: dict[str, Any],
    layers: list[dict[str, Any]],
    cli: dict[str, dict[str, Any]],
    env_model: type[BaseModel],
) -> dict[str, Any]:
    """``merged`` with each section built field by field from ``layers`` (lowest first: defaults,
    YAML ``env:``) and the section flags in ``cli`` (section -> {field: value})."""
    out = dict(merged)
    for sec in sections_of(env_model):
        fields: dict[str, Any] = {}
        for layer in layers:
            value = layer.get(sec)
            if isinstance(value, BaseModel):
                value = {k: getattr(value, k) for k in type(value).model_fields}
            if isinstance(value, dict):
                fields.update(value)
            elif value is not None:
                fields = value  # not a mapping: pydantic names the field and the value
        if sec in cli:
            if not isinstance(fields, dict):
                fields = {}
            fields.update(cli[sec])
        out[sec] = fields
    return out


__all__ = ["merge_sections", "section_flags", "sections_of"]

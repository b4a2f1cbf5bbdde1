"""The one configuration loader used by ``serve``, ``process`` and ``evaluate``.

Layers, lowest first: the env's ``config_init()`` defaults (plus a few per-subcommand defaults, e.g.
``process`` writes groups to ``data/<name>.jsonl``) < the YAML file of ``--config`` (top-level keys
``env``, ``openai`` (a mapping or a list of mappings), ``slurm``, ``testing``) < command-line flags
``--env.<field> V``, ``--openai.<field> V``, ``--slurm``, ``--testing``.

Rules (also in the docs):

* ``--flag value`` and ``--flag=value`` both work; the token after a non-boolean flag is its value
  (so negative numbers work: ``--env.max_num_workers -1``) unless it starts with ``--``: then the
  flag "needs a value" (``--flag=--x`` passes such a value). A boolean flag alone means true.
* URL fields (``--openai.base_url``, ``--env.rollout_server_url``) follow ``utils.urls``'s rule; an
  inference server's base URL without a path gets ``/v1`` (``LoadedConfig.notices`` says so).
* ``none``/``null`` sets an optional field to None; lists/dicts are given in YAML/JSON syntax.
* Unknown flags and unknown YAML keys are errors that suggest the nearest name; a bad value names
  the field and where it came from. Nothing is silently ignored.
* ``--openai.<field>`` with several servers applies to every server, except ``--openai.base_url``:
  it replaces the server list by one server per comma-separated URL (each inheriting the first
  server's other settings), so a single ``--openai.base_url`` is always honoured.
* An env class may take more groups of servers (``server_namespaces()``, e.g. a distillation env's
  ``teacher``): each gets ``--<name>.<field>`` flags and a ``<name>:`` YAML key with the same rules,
  and reaches the constructor as ``<name>_server_configs=`` (``LoadedConfig.extra_servers``); a group
  whose default is None and that nothing configures is not passed.
* An env-config field whose type is a settings model is a section with its own flags
  ``--<section>.<field>`` (``config_sections``; e.g. ``--openenv.url``).
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import yaml
from pydantic import BaseModel, ValidationError

from atroposlib.errors import ConfigError, HelpRequested  # HelpRequested: defined there
from atroposlib.inference_clients.config import APIServerConfig, ServerBaseline
from atroposlib.runtime.config import BaseEnvConfig, ServerConfigs
from atroposlib.runtime.config_help import render_help
from atroposlib.runtime.config_sections import (
    merge_sections,
    section_flags,
    sections_of,
)
from atroposlib.runtime.context import EnvClass
from atroposlib.runtime.sinks import groups_path_problem
from atroposlib.utils.settings_cli import error_message
from atroposlib.utils.urls import base_url_error, with_openai_root
from atroposlib.utils.yaml_config import load_yaml_mapping

SUBCOMMANDS = ("serve", "process", "evaluate")
_TOP_LEVEL_YAML_KEYS = ("env", "openai", "slurm", "testing")
_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n"}


@dataclass
class LoadedConfig:
    """The result of loading: what ``BaseEnv.__init__`` receives, plus where it came from."""

    env: BaseEnvConfig
    servers: ServerConfigs
    slurm: bool = False
    testing: bool = False
    config_path: Optional[str] = None
    sources: dict[str, str] = field(default_factory=dict)
    extra_servers: dict[str, ServerConfigs] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    """One-line notes for the user about what was completed (a base URL without ``/v1``)."""


GROUPS_PATH_KEY = "env.data_path_to_save_groups"


def _is_bool_field(model: type[BaseModel], name: str) -> bool:
    ann = model.model_fields[name].annotation
    return ann is bool


def _wants_raw_string(model: type[BaseModel], name: str) -> bool:
    ann = model.model_fields[name].annotation
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    return ann is str or (typing.get_origin(ann) is Union and args == [str])


def _parse_value(model: type[BaseModel], name: str, raw: str) -> Any:
    """Turn a flag's text into a Python value; pydantic validates it afterwards."""
    if raw.strip().lower() in ("none", "null"):
        return None
    if _is_bool_field(model, name):
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        return raw  # pydantic will reject it, naming the field
    if _wants_raw_string(model, name):
        return raw
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _suggest(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f"; did you mean {close[0]}?" if close else ""


def _format_validation_error(err: ValidationError, sources: dict[str, str], prefix: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    key = f"{prefix}{loc}" if loc else prefix.rstrip(".")
    where = sources.get(key, "defaults")
    return f"invalid value for --{key} (from {where}): {error_message(first)} (got {first.get('input')!r})"


def _check_url(url: Any, key: str, sources: dict[str, str]) -> None:
    """A URL field must be an http(s) base URL (``utils.urls``: the rule every command uses)."""
    if not isinstance(url, str) or not url.strip():
        return  # None / empty: the field's own default applies; other types: pydantic says so
    problem = base_url_error(url, f"--{key}")
    if problem:
        where = sources.get(key, "defaults")
        raise ConfigError(problem if where == f"--{key}" else f"{problem} (from {where})")


def _groups_origin(sources: dict[str, str]) -> str:
    where = sources.get(GROUPS_PATH_KEY, "defaults")
    return "" if where == f"--{GROUPS_PATH_KEY}" else f" (from {where})"


def _check_groups_path(value: Optional[str], sources: dict[str, str]) -> None:
    """A ``data_path_to_save_groups`` that is set must be a file this user can create."""
    problem = None if value is None else groups_path_problem(value)
    if problem:
        raise ConfigError(
            f"invalid value for --{GROUPS_PATH_KEY}{_groups_origin(sources)}: {problem}"
        )


def missing_groups_path(loaded: LoadedConfig) -> Optional[str]:
    """The CLI's one line when ``process`` is left without a groups file (None: Atropos's "don't
    save", which ``process``, whose job is that file, refuses as Atropos does); None if it has one.
    Not part of ``load_config``, so code may still load a ``process`` config without a file."""
    if loaded.env.data_path_to_save_groups is not None:
        return None
    return (
        f"process needs --{GROUPS_PATH_KEY} (the .jsonl file to write groups to)"
        f"{_groups_origin(loaded.sources)}; none means don't save, which only serve and evaluate accept"
    )


def server_namespaces(env_cls: EnvClass) -> dict[str, Any]:
    """The extra server groups ``env_cls`` declares (``server_namespaces()``): name -> defaults."""
    hook = getattr(env_cls, "server_namespaces", None)
    found = dict(hook()) if callable(hook) else {}
    for name in found:
        if not str(name).isidentifier() or name in _TOP_LEVEL_YAML_KEYS or name == "config":
            raise ConfigError(f"{env_cls.__name__}.server_namespaces(): {name!r} cannot be one")
    return found


def _split_flags(
    argv: Sequence[str], env_model: type[BaseModel], namespaces: Sequence[str] = ()
) -> tuple[dict[str, str], bool]:
    """Parse ``argv`` into {flag name without dashes: raw value}; returns (flags, help_requested)."""
    known = _known_flags(env_model, namespaces)
    flags: dict[str, str] = {}
    help_requested = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("-h", "--help"):
            help_requested = True
            i += 1
            continue
        if not tok.startswith("--"):
            raise ConfigError(f"unexpected argument {tok!r}; flags look like --env.group_size 8")
        name, eq, value = tok[2:].partition("=")
        if name not in known:
            raise ConfigError(
                f"unknown flag --{name}{_suggest('--' + name, ['--' + k for k in known])}"
            )
        is_bool = known[name]
        if not eq:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if is_bool:
                if nxt is not None and nxt.strip().lower() in _TRUE | _FALSE:
                    value, i = nxt, i + 1
                else:
                    value = "true"
            else:
                if nxt is None:
                    raise ConfigError(f"--{name} needs a value")
                if nxt.startswith("--"):  # the next flag, not a value: --x --y 2
                    raise ConfigError(f"--{name} needs a value ({nxt} is the next flag)")
                value, i = nxt, i + 1
        if name in flags:
            raise ConfigError(f"flag --{name} given twice")
        flags[name] = value
        i += 1
    return flags, help_requested


def _known_flags(env_model: type[BaseModel], namespaces: Sequence[str] = ()) -> dict[str, bool]:
    """Every accepted flag name -> whether it is boolean."""
    known: dict[str, bool] = {"config": False, "slurm": True, "testing": True}
    for name in env_model.model_fields:
        known[f"env.{name}"] = _is_bool_field(env_model, name)
    for ns in ("openai", *namespaces):
        for name in APIServerConfig.model_fields:
            known[f"{ns}.{name}"] = _is_bool_field(APIServerConfig, name)
    for flag, section in section_flags(env_model).items():
        known[flag] = _is_bool_field(section, flag.partition(".")[2])
    return known


def _read_yaml(path: str, namespaces: Sequence[str] = ()) -> dict[str, Any]:
    data = load_yaml_mapping(path)
    allowed = (*_TOP_LEVEL_YAML_KEYS, *namespaces)
    for key in data:
        if key not in allowed:
            raise ConfigError(
                f"--config {path}: unknown top-level key {key!r}{_suggest(str(key), allowed)}"
            )
    return data


def _check_keys(mapping: Any, model: type[BaseModel], where: str) -> dict[str, Any]:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where} must be a mapping of field names to values")
    for key in mapping:
        if key not in model.model_fields:
            raise ConfigError(
                f"{where}: unknown field {key!r}{_suggest(str(key), list(model.model_fields))}"
            )
    return dict(mapping)


def _dump(model: BaseModel) -> dict[str, Any]:
    """Field values of a model, keeping only the ones that were set or have non-default values."""
    return {k: getattr(model, k) for k in type(model).model_fields}


def _server_help_values(server_default: Any) -> dict[str, Any]:
    """The first inference server's defaults, as ``--help`` shows them."""
    if isinstance(server_default, list) and server_default:
        return _dump(server_default[0])
    if isinstance(server_default, BaseModel):
        return {k: getattr(server_default, k, None) for k in APIServerConfig.model_fields}
    return _dump(APIServerConfig())


def subcommand_env_defaults(
    env_cls: EnvClass, subcommand: str, env: BaseEnvConfig
) -> dict[str, Any]:
    """Per-subcommand default adjustments (applied below YAML and flags)."""
    name = env_cls.name or env_cls.__name__
    out: dict[str, Any] = {}
    if env.wandb_name is None:
        out["wandb_name"] = name
    if subcommand == "process":  # all-equal groups: the same rule as serve (runtime.sending)
        out["include_messages"] = True
        if env.data_path_to_save_groups is None:
            out["data_path_to_save_groups"] = f"data/{name}.jsonl"
    if subcommand == "evaluate" and env.data_dir_to_save_evals is None:
        out["data_dir_to_save_evals"] = f"eval_results/{name}"
    return out


def _resolve_servers(
    defaults: Any,
    yaml_openai: Any,
    cli_openai: dict[str, Any],
    sources: dict[str, str],
    config_path: str,
    namespace: str = "openai",
    notices: Optional[list[str]] = None,
) -> ServerConfigs:
    if isinstance(defaults, APIServerConfig):
        base: list[APIServerConfig] = [defaults]
    elif isinstance(defaults, list):
        base = list(defaults)
    else:
        base = []
    baseline = (
        defaults
        if (isinstance(defaults, ServerBaseline) and not isinstance(defaults, APIServerConfig))
        else None
    )
    if yaml_openai is None and not cli_openai:
        return baseline if baseline is not None and not base else base

    def template(i: int) -> dict[str, Any]:
        if i < len(base):
            return _dump(base[i])
        if base:
            return _dump(base[0])
        if baseline is not None:
            return {k: getattr(baseline, k) for k in type(baseline).model_fields}
        return {}

    dicts: list[dict[str, Any]]
    if yaml_openai is not None:
        entries = yaml_openai if isinstance(yaml_openai, list) else [yaml_openai]
        if not entries:
            raise ConfigError(f"--config {config_path}: '{namespace}' is an empty list")
        dicts = []
        for i, entry in enumerate(entries):
            where = f"--config {config_path}: {namespace}" + (
                f"[{i}]" if isinstance(yaml_openai, list) else ""
            )
            dicts.append({**template(i), **_check_keys(entry, APIServerConfig, where)})
    else:
        dicts = [template(i) for i in range(max(1, len(base)))]

    if cli_openai:
        overrides = dict(cli_openai)
        urls = overrides.pop("base_url", None)
        if urls is not None:
            url_list = [u.strip() for u in str(urls).split(",") if u.strip()] if urls else [""]
            dicts = [
                {**(dicts[i] if i < len(dicts) else dicts[0]), "base_url": u}
                for i, u in enumerate(url_list)
            ]
        dicts = [{**d, **overrides} for d in dicts]

    servers = []
    for d in dicts:
        key = f"{namespace}.base_url"
        _check_url(d.get("base_url"), key, sources)
        url = d.get("base_url")
        if isinstance(url, str) and url.strip() and with_openai_root(url) != url.strip():
            d["base_url"] = with_openai_root(url)
            where = sources.get(key, "defaults")
            origin = "" if where == f"--{key}" else f" (from {where})"
            if notices is not None:
                notices.append(
                    f"--{key} {url.strip()!r}{origin} has no path; using {d['base_url']!r}, where "
                    "OpenAI-compatible servers answer (give the full URL to silence this)"
                )
        try:
            servers.append(APIServerConfig.model_validate(d))
        except ValidationError as e:
            raise ConfigError(_format_validation_error(e, sources, f"{namespace}.")) from None
    return servers


@dataclass
class _FlagValues:
    """The command line's values, by where they go."""

    env: dict[str, Any] = field(default_factory=dict)
    openai: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # by server namespace
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)  # by env-config section


def _yaml_layer(
    config_path: Optional[str],
    env_model: type[BaseModel],
    namespaces: Sequence[str],
    sources: dict[str, str],
    top: dict[str, bool],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the whole ``--config`` mapping, its checked ``env`` part); notes in ``sources`` where each
    env and openai key came from and sets ``top``'s ``slurm`` and ``testing``."""
    yaml_data: dict[str, Any] = _read_yaml(config_path, namespaces) if config_path else {}
    yaml_env = _check_keys(yaml_data.get("env") or {}, env_model, f"--config {config_path}: env")
    for k in yaml_env:
        sources[f"env.{k}"] = f"--config {config_path}"
    yaml_openai = yaml_data.get("openai")
    for entry in yaml_openai if isinstance(yaml_openai, list) else [yaml_openai]:
        for k in entry if isinstance(entry, dict) else ():
            sources[f"openai.{k}"] = f"--config {config_path}"
    for key in ("slurm", "testing"):
        value = yaml_data.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"--config {config_path}: {key} must be true or false, got {value!r}")
        top[key] = value
    return yaml_data, yaml_env


def _flag_layer(
    flags: dict[str, str],
    env_model: type[BaseModel],
    namespaces: Sequence[str],
    sources: dict[str, str],
    top: dict[str, bool],
) -> _FlagValues:
    """Each flag's value parsed for the field it names; the top-level booleans go to ``top``."""
    values = _FlagValues(extra={ns: {} for ns in namespaces})
    sections = sections_of(env_model)
    for name, raw in flags.items():
        sources[name] = f"--{name}"
        head, _, key = name.partition(".")
        if name.startswith("env."):
            values.env[key] = _parse_value(env_model, key, raw)
        elif name.startswith("openai."):
            values.openai[key] = _parse_value(APIServerConfig, key, raw)
        elif head in values.extra:
            values.extra[head][key] = _parse_value(APIServerConfig, key, raw)
        elif head in sections:
            values.sections.setdefault(head, {})[key] = _parse_value(sections[head], key, raw)
            sources[f"env.{name}"] = f"--{name}"
        else:
            low = raw.strip().lower()
            if low not in _TRUE | _FALSE:
                raise ConfigError(f"invalid value for --{name}: {raw!r} (use true or false)")
            top[name] = low in _TRUE
    return values


def _env_config(
    env_model: type[BaseEnvConfig],
    layers: list[dict[str, Any]],
    cli_sections: dict[str, dict[str, Any]],
    sources: dict[str, str],
) -> BaseEnvConfig:
    """The env config from its ``layers`` (lowest first) and the sections' flags, validated; a
    mistake is one ``ConfigError`` naming the flag or key it came from."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    merged = merge_sections(merged, layers, cli_sections, env_model)
    _check_url(merged.get("rollout_server_url"), "env.rollout_server_url", sources)
    try:
        env = env_model.model_validate(merged)
    except ValidationError as e:
        text = _format_validation_error(e, sources, "env.")
        for sec in sections_of(env_model):  # a section field's flag is --<section>.<field>
            text = text.replace(f"--env.{sec}.", f"--{sec}.")
        raise ConfigError(text) from None
    _check_groups_path(env.data_path_to_save_groups, sources)
    return env


def load_config(env_cls: EnvClass, subcommand: str, argv: Sequence[str]) -> LoadedConfig:
    """Build the env and server configs for ``subcommand`` from defaults, ``--config`` YAML and flags.

    Raises ``ConfigError`` (one line, naming the flag/field) on any mistake; ``--help`` raises
    ``HelpRequested`` carrying the help text.
    """
    if subcommand not in SUBCOMMANDS:
        raise ConfigError(
            f"unknown subcommand {subcommand!r}{_suggest(subcommand, SUBCOMMANDS)}; use one of {', '.join(SUBCOMMANDS)}"
        )
    env_default, server_default = env_cls.config_init()
    env_model = type(env_default)
    namespaces = server_namespaces(env_cls)
    flags, help_requested = _split_flags(argv, env_model, list(namespaces))
    env_base = {**_dump(env_default), **subcommand_env_defaults(env_cls, subcommand, env_default)}
    if help_requested:
        shown_servers = _server_help_values(server_default)
        text = render_help(
            env_cls.__name__, subcommand, env_model, env_base, shown_servers, list(namespaces)
        )
        raise HelpRequested(text)

    sources: dict[str, str] = {}
    top: dict[str, bool] = {}
    config_path = flags.pop("config", None)
    yaml_data, yaml_env = _yaml_layer(config_path, env_model, list(namespaces), sources, top)
    cli = _flag_layer(flags, env_model, list(namespaces), sources, top)
    env = _env_config(env_model, [env_base, yaml_env, cli.env], cli.sections, sources)
    notices: list[str] = []
    servers = _resolve_servers(
        server_default,
        yaml_data.get("openai"),
        cli.openai,
        sources,
        str(config_path),
        notices=notices,
    )
    extra: dict[str, ServerConfigs] = {}
    for ns, default in namespaces.items():
        if default is None and yaml_data.get(ns) is None and not cli.extra[ns]:
            continue  # nothing configures it: the env gets its own default (None)
        extra[ns] = _resolve_servers(
            default,
            yaml_data.get(ns),
            cli.extra[ns],
            sources,
            str(config_path),
            namespace=ns,
            notices=notices,
        )
    return LoadedConfig(
        env=env,
        servers=servers,
        slurm=top["slurm"],
        testing=top["testing"],
        config_path=config_path,
        sources=sources,
        extra_servers=extra,
        notices=notices,
    )


__all__ = [
    "HelpRequested",
    "LoadedConfig",
    "load_config",
    "server_namespaces",
    "subcommand_env_defaults",
]

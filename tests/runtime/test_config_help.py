"""The --help text: env fields, section fields and server fields shown with the default a user would type."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from atroposlib.runtime.config_help import render_help


class Mode(str, Enum):
    FAST = "fast"
    SLOW = "slow"


class Remote(BaseModel):
    mode: Mode = Field(Mode.SLOW, description="How to play.")
    url: str = Field("ws://x", description="Where.")


class EnvFields(BaseModel):
    mode: Mode = Field(Mode.FAST, description="Env mode.")
    remote: Remote = Field(default_factory=Remote, description="The remote env.")


def _help(**server: object) -> str:
    values = {"mode": Mode.FAST, "remote": Remote(url="ws://set")}
    return render_help("MyEnv", "serve", EnvFields, values, dict(server), ["teacher"])


def test_enum_defaults_show_their_value_in_env_and_section_flags():
    lines = _help().split("\n")
    assert lines[0].startswith("usage: MyEnv serve ")
    env_line = next(x for x in lines if x.lstrip().startswith("--env.mode "))
    section_line = next(x for x in lines if x.lstrip().startswith("--remote.mode "))
    assert env_line.endswith("Env mode. (default: fast)")
    assert section_line.endswith("How to play. (default: slow)")  # not <Mode.SLOW: 'slow'>
    url_line = next(x for x in lines if x.lstrip().startswith("--remote.url "))
    assert url_line.endswith("(default: 'ws://set')")  # the env's value, not the field's default


def test_server_defaults_hide_the_api_key_and_list_other_namespaces():
    text = _help(api_key="sk-secret", model_name="policy")
    assert "sk-secret" not in text
    assert "--openai.api_key" in text and "(default: ***)" in text
    assert "(default: 'policy')" in text
    assert "--teacher.FIELD: the teacher servers" in text

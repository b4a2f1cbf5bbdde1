"""Env-config sections: a settings-model field of the env config gets ``--<section>.<field>`` flags."""

from __future__ import annotations

from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, Field

from atroposlib.envs.base import BaseEnv, BaseEnvConfig
from atroposlib.errors import ConfigError
from atroposlib.runtime.config_loader import HelpRequested, load_config


class Remote(BaseModel):
    url: str = Field(default="", description="Where the remote lives.")
    turns: int = Field(default=3, ge=1, description="Turns per episode.")
    verbose: bool = Field(default=False, description="Say more.")
    mode: Literal["sum", "last"] = Field(default="sum", description="How rewards add up.")


class RemoteConfig(BaseEnvConfig):
    remote: Remote = Field(default_factory=Remote, description="The remote's settings.")


class RemoteEnv(BaseEnv):
    name = "remote"
    env_config_cls = RemoteConfig

    @classmethod
    def config_init(cls):
        return RemoteConfig(remote=Remote(turns=5, mode="last")), []


def test_section_flags_merge_field_by_field_over_yaml_and_defaults(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"env": {"group_size": 2, "remote": {"url": "ws://y:1"}}}))
    loaded = load_config(
        RemoteEnv,
        "process",
        ["--config", str(cfg), "--remote.verbose", "--remote.turns=7", "--env.total_steps", "3"],
    )
    r = loaded.env.remote
    assert isinstance(r, Remote)
    # flag, flag, YAML, config_init default (not the model's own default "sum")
    assert (r.turns, r.verbose, r.url, r.mode) == (7, True, "ws://y:1", "last")
    assert loaded.env.group_size == 2 and loaded.env.total_steps == 3
    flag_only = load_config(RemoteEnv, "serve", ["--remote.url", "ws://z:2"]).env.remote
    assert (flag_only.url, flag_only.turns, flag_only.mode) == ("ws://z:2", 5, "last")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--remote.urll", "x"], "unknown flag --remote.urll; did you mean --remote.url?"),
        (["--remote.turns", "0"], "invalid value for --remote.turns (from --remote.turns)"),
        (["--remote.mode", "avg"], "invalid value for --remote.mode"),
        (["--remote.turns"], "needs a value"),
    ],
)
def test_section_mistakes_are_one_line_errors_naming_the_flag(argv, message):
    with pytest.raises(ConfigError) as e:
        load_config(RemoteEnv, "serve", argv)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_help_lists_the_section_flags_with_their_defaults():
    with pytest.raises(HelpRequested) as h:
        load_config(RemoteEnv, "process", ["--help"])
    text = str(h.value)
    assert "remote options" in text
    assert "--remote.turns" in text and "Turns per episode. (default: 5)" in text
    assert "--remote.mode" in text and "(default: 'last')" in text

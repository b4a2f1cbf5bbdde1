"""The one settings-model -> command-line helper (run-api, atropos-serve-model and the trainer)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal, Optional

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from atroposlib.api.settings import ApiSettings
from atroposlib.cli.run_api import build_parser as run_api_parser
from atroposlib.cli.serve_model import build_parser as serve_model_parser
from atroposlib.inference.config import EngineConfig
from atroposlib.utils.settings_cli import (
    Flag,
    add_model_arguments,
    error_message,
    flag_name,
    format_validation_error,
    model_values,
)


class Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="What to call it.")
    size: int = Field(4, gt=0, description="How big; 100% sure.")
    ratio: Optional[float] = Field(None, description="A ratio.")
    mode: Literal["fast", "slow"] = Field("fast", description="Which way.")
    verbose: bool = Field(False, description="Say more.")
    tags: list[str] = Field(default_factory=list, description="Labels.")
    where: Path = Field(Path("./out"), description="Output folder.")


def _parser(**kw) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="knobs")
    add_model_arguments(p, Knobs, **kw)
    return p


def test_one_flag_per_field_and_back_to_the_given_values():
    p = _parser()
    assert {a.dest for a in p._actions} >= set(Knobs.model_fields)
    args = p.parse_args(["--name", "n", "--size", "7", "--verbose", "--tags", "a", "b"])
    values = model_values(args, Knobs)
    assert values == {"name": "n", "size": "7", "verbose": True, "tags": ["a", "b"]}
    k = Knobs(**values)  # pydantic converts the strings argparse read
    assert (k.size, k.ratio, k.mode, k.where) == (7, None, "fast", Path("out"))
    assert model_values(p.parse_args(["--no-verbose"]), Knobs) == {"verbose": False}
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--mode", "medium"])
    assert e.value.code == 2


def test_help_names_description_default_and_environment_variable():
    text = _parser(env_prefix="KNOBS_").format_help()
    assert "How big; 100% sure. (env KNOBS_SIZE; default: 4)" in " ".join(text.split())
    assert "(env KNOBS_NAME; required)" in " ".join(text.split())
    assert "default: out" in text and "default: []" in text


def test_flag_overrides_name_and_repeat_and_require():
    p = _parser(flags={"where": Flag("--out"), "tags": Flag("--tag", repeat=True)}, require=True)
    args = p.parse_args(["--name", "n", "--out", "x", "--tag", "a", "--tag", "b"])
    assert model_values(args, Knobs) == {"name": "n", "where": "x", "tags": ["a", "b"]}
    assert (
        flag_name("where", {"where": Flag("--out")}) == "--out" and flag_name("ratio") == "--ratio"
    )
    with pytest.raises(SystemExit):
        p.parse_args([])  # --name is required when ``require``
    with pytest.raises(ValueError, match="lacks"):
        _parser(flags={"nope": Flag("--nope")})


def test_validation_error_is_one_line_naming_fields_or_flags():
    with pytest.raises(ValidationError) as e:
        Knobs.model_validate({"name": "n", "size": "0", "sise": 3})
    line = format_validation_error(e.value, Knobs)
    assert line.startswith("invalid config: ") and "\n" not in line
    assert "size: Input should be greater than 0 (got '0')" in line
    assert "sise: unknown field; did you mean size?" in line
    flagged = format_validation_error(
        e.value, Knobs, lead="", flags={"size": Flag("--big")}, as_flags=True
    )
    assert flagged.startswith("--big: Input should be greater than 0")


class Checked(BaseModel):
    url: str = "http://x"

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith("http"):
            raise ValueError("must start with http")
        return v


def test_a_validator_message_has_no_pydantic_prefix():
    with pytest.raises(ValidationError) as e:
        Checked(url="ftp://x")
    assert "Value error, " in str(e.value)  # what pydantic itself says
    assert error_message(e.value.errors()[0]) == "must start with http"
    line = format_validation_error(e.value, Checked, lead="", as_flags=True)
    assert line == "--url: must start with http (got 'ftp://x')"


def test_run_api_and_serve_model_flags_are_their_settings_fields():
    api = run_api_parser()
    assert {a.dest for a in api._actions} >= set(ApiSettings.model_fields)
    args = api.parse_args(["--cors-origin", "http://a", "--cors-origin", "http://b", "--resume"])
    assert model_values(args, ApiSettings) == {"cors_origins": ["http://a", "http://b"]}
    assert args.start_mode == "resume"
    serve = serve_model_parser()
    assert {a.dest for a in serve._actions} >= set(EngineConfig.model_fields)
    args = serve.parse_args(["--model", "m", "--port", "9100", "--dtype", "bfloat16"])
    config = EngineConfig(**model_values(args, EngineConfig))
    assert (config.model_path, config.port, config.dtype) == ("m", 9100, "bfloat16")


def test_a_validated_list_item_keeps_its_base_type_as_metavar():
    from typing import Annotated

    from pydantic import AfterValidator

    class Urls(BaseModel):
        urls: list[Annotated[str, AfterValidator(str.strip)]] = []

    p = argparse.ArgumentParser(prog="u")
    add_model_arguments(p, Urls)
    assert "[--urls [STR ...]]" in p.format_usage()

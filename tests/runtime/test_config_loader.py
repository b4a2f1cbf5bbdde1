"""The one config loader: layering, flags, errors, --help (in-process), and the CLI's exit codes."""

from __future__ import annotations

import pytest
import yaml
from pydantic import field_validator

from atroposlib.envs.base import BaseEnv, BaseEnvConfig
from atroposlib.errors import ConfigError
from atroposlib.inference_clients.server_manager import APIServerConfig, ServerBaseline
from atroposlib.runtime.config import EvalHandlingEnum
from atroposlib.runtime.config_loader import HelpRequested, load_config
from tests.envs.example_env import AdditionEnv
from tests.envs.helpers import run_env


class MyConfig(BaseEnvConfig):
    curriculum: list = [1, 2]
    temperature: float = 1.0


class TwoServerEnv(BaseEnv):
    name = "two"

    @classmethod
    def config_init(cls):
        return MyConfig(group_size=8, temperature=0.7), [
            APIServerConfig(base_url="http://a:1/v1", model_name="m", timeout=10),
            APIServerConfig(base_url="http://b:2/v1", model_name="m", timeout=20),
        ]


class BaselineEnv(BaseEnv):
    name = "baseline"


def test_defaults_then_yaml_then_flags(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "env": {"group_size": 6, "total_steps": 9, "eval_handling": "LIMIT_TRAIN"},
                "openai": {"model_name": "from-yaml", "timeout": 33},
            }
        )
    )
    loaded = load_config(
        AdditionEnv,
        "serve",
        ["--config", str(cfg), "--env.total_steps", "11", "--openai.timeout=44"],
    )
    env, (server,) = loaded.env, loaded.servers
    assert (
        env.group_size == 6 and env.total_steps == 11 and env.max_token_length == 256
    )  # yaml, flag, config_init
    assert env.eval_handling == EvalHandlingEnum.LIMIT_TRAIN
    assert (
        server.model_name == "from-yaml" and server.timeout == 44 and server.server_type == "vllm"
    )
    assert loaded.sources["env.total_steps"] == "--env.total_steps"


def test_negative_numbers_bools_none_and_lists():
    loaded = load_config(
        TwoServerEnv,
        "serve",
        [
            "--env.max_num_workers",
            "-1",
            "--env.use_wandb",
            "--env.curriculum",
            "[3, 4]",
            "--env.temperature",
            "-0.5",
            "--env.wandb_name",
            "none",
            "--slurm",
            "false",
        ],
    )
    env = loaded.env
    assert env.max_num_workers == -1 and env.use_wandb is True and env.curriculum == [3, 4]
    assert env.temperature == -0.5 and env.wandb_name is None and loaded.slurm is False


def test_openai_flags_apply_to_every_server_and_base_url_replaces_the_list():
    loaded = load_config(TwoServerEnv, "serve", ["--openai.api_key", "k"])
    assert [s.base_url for s in loaded.servers] == ["http://a:1/v1", "http://b:2/v1"]
    assert [s.api_key for s in loaded.servers] == ["k", "k"] and [
        s.timeout for s in loaded.servers
    ] == [10, 20]
    one = load_config(TwoServerEnv, "serve", ["--openai.base_url", "http://x:9/v1"]).servers
    assert [s.base_url for s in one] == ["http://x:9/v1"] and one[0].timeout == 10
    two = load_config(
        TwoServerEnv, "serve", ["--openai.base_url", "http://x:9/v1,http://y:9/v1"]
    ).servers
    assert [s.base_url for s in two] == ["http://x:9/v1", "http://y:9/v1"]


def test_yaml_server_list_and_baseline(tmp_path):
    assert isinstance(load_config(BaselineEnv, "serve", []).servers, ServerBaseline)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump({"openai": [{"base_url": "http://p:1/v1"}, {"base_url": "http://q:1/v1"}]})
    )
    servers = load_config(BaselineEnv, "serve", ["--config", str(cfg)]).servers
    assert [s.base_url for s in servers] == ["http://p:1/v1", "http://q:1/v1"]


def test_process_and_evaluate_defaults():
    proc = load_config(AdditionEnv, "process", []).env
    assert proc.data_path_to_save_groups == "data/addition_test.jsonl"
    assert proc.ensure_scores_are_not_same is False and proc.include_messages is True
    assert load_config(AdditionEnv, "serve", []).env.ensure_scores_are_not_same is True
    assert (
        load_config(AdditionEnv, "evaluate", []).env.data_dir_to_save_evals
        == "eval_results/addition_test"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--env.grup_size", "3"], "unknown flag --env.grup_size; did you mean --env.group_size?"),
        (["--openai.modelname", "x"], "did you mean --openai.model_name?"),
        (["--env.group_size", "abc"], "invalid value for --env.group_size (from --env.group_size)"),
        (["--env.group_size"], "--env.group_size needs a value"),
        (
            ["--env.score_timeout", "0"],
            "invalid value for --env.score_timeout (from --env.score_timeout): Input should be "
            "greater than 0 (got 0)",
        ),
        (["--env.score_timeout", "-5"], "invalid value for --env.score_timeout"),
        (
            ["--env.tokenizer_name", "--env.total_steps", "2"],
            "--env.tokenizer_name needs a value (--env.total_steps is the next flag)",
        ),
        (["--env.eval_handling", "SOMETIMES"], "--env.eval_handling"),
        (["positional"], "unexpected argument 'positional'"),
        (["--config", "/nonexistent.yaml"], "no such file"),
        (
            ["--openai.base_url", "localhost:9001/v1"],
            "--openai.base_url 'localhost:9001/v1' must start with http:// or https:// "
            "(did you mean 'http://localhost:9001/v1'?)",
        ),
        (
            ["--env.rollout_server_url", "localhost:8000"],
            "--env.rollout_server_url 'localhost:8000' must start with http:// or https://",
        ),
        (
            ["--openai.base_url", "http://h:0/v1"],
            "--openai.base_url 'http://h:0/v1' has an invalid port",
        ),
    ],
)
def test_mistakes_are_one_line_errors_naming_the_field(argv, message):
    with pytest.raises(ConfigError) as e:
        load_config(AdditionEnv, "serve", argv)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_unknown_yaml_keys_are_errors(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"env": {"groupsize": 2}}))
    with pytest.raises(ConfigError, match=r"unknown field 'groupsize'; did you mean group_size\?"):
        load_config(AdditionEnv, "serve", ["--config", str(cfg)])
    cfg.write_text(yaml.safe_dump({"opeani": {}}))
    with pytest.raises(ConfigError, match="did you mean openai"):
        load_config(AdditionEnv, "serve", ["--config", str(cfg)])
    cfg.write_text(yaml.safe_dump({"env": {"group_size": "many"}}))
    with pytest.raises(ConfigError, match=r"--env.group_size \(from --config"):
        load_config(AdditionEnv, "serve", ["--config", str(cfg)])


def test_help_lists_every_field_with_description_and_default():
    with pytest.raises(HelpRequested) as h:
        load_config(TwoServerEnv, "process", ["--help"])
    text = str(h.value)
    for name, field in MyConfig.model_fields.items():
        line = next(line for line in text.splitlines() if line.strip().startswith(f"--env.{name} "))
        assert field.description is None or field.description in line
        assert "(default: " in line
    assert "--env.temperature" in text and "(default: 0.7)" in text
    for name in APIServerConfig.model_fields:
        assert f"--openai.{name} " in text
    assert all(f.description for f in BaseEnvConfig.model_fields.values())
    assert all(f.description for f in APIServerConfig.model_fields.values())


def test_cli_exit_codes_without_traceback(tmp_path):
    bad = run_env("serve", "--env.max_num_worker", "-1", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert (
        bad.stderr.strip()
        == "error: unknown flag --env.max_num_worker; did you mean --env.max_num_workers?"
    )
    helped = run_env("process", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--env.group_size" in helped.stdout


def test_value_given_to_a_flag_may_start_with_dashes_when_joined_by_equals():
    cfg = load_config(AdditionEnv, "serve", ["--env.wandb_name=--x", "--env.total_steps", "2"])
    assert (cfg.env.wandb_name, cfg.env.total_steps) == ("--x", 2)


def test_url_from_yaml_is_named_with_its_file(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"openai": [{"base_url": "localhost:1/v1"}]}))
    with pytest.raises(ConfigError) as e:
        load_config(AdditionEnv, "serve", ["--config", str(cfg)])
    assert str(e.value) == (
        "--openai.base_url 'localhost:1/v1' must start with http:// or https:// "
        f"(did you mean 'http://localhost:1/v1'?) (from --config {cfg})"
    )


class StrictConfig(BaseEnvConfig):
    level: int = 1

    @field_validator("level")
    @classmethod
    def _odd(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError("level must be odd")
        return v


class StrictEnv(BaseEnv):
    name = "strict"

    @classmethod
    def config_init(cls):
        return StrictConfig(), APIServerConfig(base_url="http://a:1/v1", model_name="m")


def test_a_validator_message_has_no_pydantic_prefix():
    with pytest.raises(ConfigError) as e:
        load_config(StrictEnv, "serve", ["--env.level", "2"])
    assert str(e.value) == (
        "invalid value for --env.level (from --env.level): level must be odd (got 2)"
    )


def test_cli_url_and_missing_value_are_one_line_exit_2(tmp_path):
    from tests.cli_checks import one_line_error

    bad_url = run_env("process", "--openai.base_url", "localhost:9001/v1", cwd=tmp_path)
    one_line_error(bad_url, 2, "error: --openai.base_url 'localhost:9001/v1' must start with")
    missing = run_env("process", "--env.tokenizer_name", "--env.total_steps", "2", cwd=tmp_path)
    line = one_line_error(missing, 2)
    assert line == "error: --env.tokenizer_name needs a value (--env.total_steps is the next flag)"
    assert list(tmp_path.iterdir()) == []


def test_base_url_without_a_scheme_is_rejected_up_front():
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        load_config(AdditionEnv, "serve", ["--openai.base_url", "notaurl"])
    cfg = load_config(AdditionEnv, "serve", ["--openai.base_url", " http://127.0.0.1:9/v1 "])
    assert [s.base_url for s in cfg.servers] == ["http://127.0.0.1:9/v1"]


def test_missing_tokenizer_error_keeps_the_reason(tmp_path):
    from atroposlib.errors import ModelLoadError
    from atroposlib.utils.tokenizer_loading import load_tokenizer

    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ModelLoadError) as e:
        load_tokenizer(str(tmp_path))
    message = str(e.value)
    assert (
        "JSONDecodeError" in message and "--env.tokenizer_name" in message and "\n" not in message
    )


def test_missing_local_tokenizer_path_is_named_as_such(tmp_path):
    from atroposlib.errors import ModelLoadError
    from atroposlib.utils.tokenizer_loading import load_tokenizer

    for name in (str(tmp_path / "no-such-tokenizer"), "./models/tok", "models/qwen/tok"):
        with pytest.raises(ModelLoadError) as e:
            load_tokenizer(name)
        message = str(e.value)
        assert message.startswith("tokenizer directory not found") and "Repo id" not in message

"""TrainingConfig and the CLI generated from it: one list of fields, validated, unknown flags refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from atroposlib.errors import ConfigError
from example_trainer.config import TrainingConfig, build_parser, parse_config


def test_every_field_has_a_flag_with_its_description():
    help_text = build_parser().format_help()
    for name, field in TrainingConfig.model_fields.items():
        assert "--" + name.replace("_", "-") in help_text
        assert field.description, f"{name} has no description"


def test_flags_are_converted_and_validated():
    cfg = parse_config(
        [
            "--model-name",
            "m",
            "--lr",
            "5e-4",
            "--training-steps",
            "7",
            "--no-use-inference-logprobs",
            "--inference-urls",
            "http://a:1",
            "http://b:2",
            "--weight-refresh",
            "reload",
        ]
    )
    assert cfg.lr == 5e-4 and cfg.training_steps == 7 and cfg.use_inference_logprobs is False
    assert cfg.inference_urls == ["http://a:1", "http://b:2"] and cfg.weight_refresh == "reload"
    assert cfg.resolved_inference_urls() == ["http://a:1", "http://b:2"]
    assert parse_config(["--model-name", "m"]).resolved_inference_urls() == [
        "http://127.0.0.1:9001"
    ]


def test_bad_values_name_the_field():
    with pytest.raises(ConfigError, match="lr"):
        parse_config(["--model-name", "m", "--lr", "-1"])
    with pytest.raises(ConfigError, match="batch_size"):
        parse_config(["--model-name", "m", "--batch-size", "many"])
    with pytest.raises(ConfigError, match="model_name"):
        parse_config([])
    with pytest.raises(ConfigError, match="adam_betas"):
        parse_config(["--model-name", "m", "--adam-betas", "0.9"])
    with pytest.raises(ConfigError, match="api_url"):
        parse_config(["--model-name", "m", "--api-url", "localhost:8000"])
    with pytest.raises(ConfigError, match=r"cpu_cores: core\(s\) 4096 are not available here"):
        parse_config(["--model-name", "m", "--cpu-cores", "0", "4096"])


def test_cpu_cores_pin_the_trainer(tmp_path):
    """--cpu-cores keeps the process on those cores (checked in a child: pinning is per process)."""
    import os
    import subprocess
    import sys

    core = sorted(os.sched_getaffinity(0))[-1]
    code = (
        "import os; from example_trainer.config import parse_config; "
        "from example_trainer.model_setup import pin_cpu_cores; "
        f"cfg = parse_config(['--model-name', 'm', '--cpu-cores', '{core}']); "
        "pin_cpu_cores(cfg.cpu_cores); print(sorted(os.sched_getaffinity(0)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"[{core}]"


def test_a_tis_cap_that_would_do_nothing_is_refused():
    """CISPO clips its importance weight with eps_low/eps_high; --tis-cap used to be accepted and
    silently ignored."""
    with pytest.raises(ConfigError, match="tis_cap has no effect with loss_type cispo"):
        parse_config(["--model-name", "m", "--loss-type", "cispo", "--tis-cap", "3"])
    assert parse_config(["--model-name", "m", "--loss-type", "cispo"]).tis_cap == 2.0  # default
    assert parse_config(["--model-name", "m", "--loss-type", "gspo", "--tis-cap", "3"]).tis_cap == 3


def test_clip_reference_proximal_with_cispo_is_refused():
    """CISPO's weight is its clipped ratio against the sampler: a proximal reference would do nothing."""
    with pytest.raises(
        ConfigError, match="clip_reference proximal has no effect with loss_type cispo"
    ):
        parse_config(["--model-name", "m", "--loss-type", "cispo", "--clip-reference", "proximal"])
    assert parse_config(["--model-name", "m", "--loss-type", "cispo"]).clip_reference == "proximal"
    assert parse_config(["--model-name", "m"]).clip_reference == "proximal"
    assert (
        parse_config(["--model-name", "m", "--clip-reference", "behaviour"]).clip_reference
        == "behaviour"
    )


def test_yaml_is_layered_under_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("model_name: from-yaml\nlr: 0.001\nbatch_size: 8\n")
    cfg = parse_config(["--config", str(f), "--lr", "0.002"])
    assert (cfg.model_name, cfg.lr, cfg.batch_size) == ("from-yaml", 0.002, 8)
    f.write_text("model_name: m\nlearning_rate: 1\n")
    with pytest.raises(ConfigError, match="learning_rate"):
        parse_config(["--config", str(f)])


def test_cli_errors_are_one_line_without_traceback(capsys):
    from example_trainer.grpo import main

    assert main(["--model-name", "m", "--eps-low", "2"]) == 2  # a bad value: nothing started
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "eps_low" in err and "Traceback" not in err
    assert "Value error" not in err
    unknown = subprocess.run(
        [sys.executable, "-m", "example_trainer.grpo", "--model-name", "m", "--bogus", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unknown.returncode == 2 and "unrecognized arguments: --bogus" in unknown.stderr
    assert unknown.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--api-url", "localhost:8000"], "api_url"),
        (["--inference-urls", "http://127.0.0.1:9001", "127.0.0.1:9002"], "inference_urls.1"),
    ],
)
def test_urls_follow_the_one_url_rule(tmp_path, flags, field):
    from tests.cli_checks import one_line_error, run_module

    proc = run_module("example_trainer.grpo", "--model-name", "m", *flags, cwd=tmp_path)
    one_line_error(
        proc,
        2,
        f"atropos-grpo: error: invalid config: {field}: must start with http:// or https://",
    )
    assert list(tmp_path.iterdir()) == []


def test_missing_model_folder_is_a_one_line_error(tmp_path, capsys):
    from example_trainer.grpo import main

    missing = tmp_path / "no-model"
    assert (
        main(
            [
                "--model-name",
                str(missing),
                "--training-steps",
                "1",
                "--save-path",
                str(tmp_path / "ckpt"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("atropos-grpo: error: cannot load the model") and str(missing) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_yaml_typo_gets_a_did_you_mean(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("model_name: m\ntraining_step: 5\n")
    with pytest.raises(ConfigError) as e:
        parse_config(["--config", str(f)])
    message = str(e.value)
    assert "training_step: unknown field; did you mean training_steps?" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "flag, field, known",
    [
        ("--loss-type", "loss_type", "grpo, gspo, cispo"),
        ("--inference-server", "inference_server", "auto, atropos, "),
    ],
)
def test_a_registry_backed_field_names_what_it_accepts(flag, field, known):
    """One rule for the fields whose values come from a registry (losses, refreshable servers)."""
    with pytest.raises(ConfigError) as e:
        parse_config(["--model-name", "m", flag, "zz"])
    assert f"{field}: must be one of {known}" in str(e.value)
    assert "not 'zz'" in str(e.value)

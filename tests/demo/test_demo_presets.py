"""The preset registry: a model/task pair nobody registered is a one-line error naming the models that
run the task; every registered preset fills its own defaults, points at an env file that exists and
takes only settings the parser declares; a new preset is one more entry in ``PRESETS``."""

from __future__ import annotations

import dataclasses

import pytest

import demo.presets as registry
from demo.cli import parse_args
from demo.flags import PRESET_SETTINGS
from demo.paths import RUNS
from demo.presets import PRESETS, find_preset, flag_label


def test_an_unregistered_combination_is_a_clear_error(capsys):
    with pytest.raises(ValueError, match=r"^--task calculator runs with --model smollm2$"):
        find_preset("tiny", "calculator")
    with pytest.raises(ValueError, match="no preset runs --task chess"):
        find_preset("tiny", "chess")
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "tiny", "--task", "calculator"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err == "atropos-demo: error: --task calculator runs with --model smollm2\n"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_each_preset_fills_its_own_defaults(preset):
    args = parse_args(["--model", preset.model, "--task", preset.task, "--schedule", "overlap"])
    assert find_preset(args.model, args.task) is preset
    for key, value in preset.defaults.items():
        assert getattr(args, key) == value, key
    assert args.inference == preset.servers[0]
    assert args.out == RUNS / preset.folder
    control = parse_args(["--model", preset.model, "--task", preset.task, "--control", "shuffled"])
    assert control.out == RUNS / f"{preset.folder}-control"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_each_preset_is_complete(preset):
    assert preset.env_file.is_file()
    assert set(preset.settings) <= set(PRESET_SETTINGS)
    needed = {"steps", "prompts_per_step", "group_size", "lr", "warmup_sft_steps", "threads"}
    assert needed <= set(preset.defaults), needed - set(preset.defaults)
    assert set(preset.servers) <= {"engine", "vllm"} and preset.servers
    assert [p.name for p in PRESETS].count(preset.name) == 1  # one preset per model and task


def test_flags_a_preset_does_not_take_are_refused_naming_who_takes_them(capsys):
    for argv, message in (
        (["--operands", "10", "99"], "--operands applies to --model smollm2"),
        (["--model", "smollm2", "--task", "calculator", "--operands", "1", "9"], "--operands"),
        (["--heldout", "8"], "--heldout applies to --model smollm2 --task calculator"),
        (
            ["--warmup-compute-share", "0.5"],
            "--warmup-compute-share applies to --model smollm2 --task harbor",
        ),
        (
            ["--model", "smollm2", "--task", "harbor", "--warmup-compute-share", "1.5"],
            "must be between 0 and 1",
        ),
        (
            ["--model", "smollm2", "--task", "harbor", "--warmup-compute-share", "most"],
            "must be a number",
        ),
        (["--task", "calculator", "--model", "smollm2", "--inference", "engine"], "a real vLLM"),
    ):
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and message in err, (argv, err)


def test_a_new_preset_is_one_more_entry(monkeypatch):
    tiny = find_preset("tiny", "arithmetic")
    chess = dataclasses.replace(
        tiny, task="chess", folder="demo-chess", defaults={**tiny.defaults, "steps": 7}
    )
    monkeypatch.setattr(registry, "PRESETS", (*PRESETS, chess))
    args = parse_args(["--task", "chess"])
    assert (args.task, args.steps, args.prompts_per_step) == ("chess", 7, 16)
    assert args.out == RUNS / "demo-chess" and flag_label(chess) == "--model tiny --task chess"


def test_the_command_line_loads_without_torch_or_the_env_toolkit():
    """The registry imports every preset when the CLI starts: a preset imports torch, transformers
    and the env toolkit where it uses them (the GPU check imports the demo from a bundle without
    the toolkit's math scorers)."""
    import subprocess
    import sys

    code = (
        "import sys, demo.cli, example_trainer.demo\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers') "
        "or m.startswith('atroposlib.envkit')]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_harbor_warm_up_share_is_the_flag_or_the_default():
    from demo.harbor_warmup import COMPUTE_SHARE, compute_share

    args = parse_args(["--model", "smollm2", "--task", "harbor", "--warmup-compute-share", "0.6"])
    assert compute_share(args) == 0.6
    assert compute_share(parse_args(["--model", "smollm2", "--task", "harbor"])) == COMPUTE_SHARE

"""The demo rejects bad counts and combinations while parsing flags, before it builds a model or clears
its report folder; unset flags take the chosen preset's defaults."""

import pytest

from demo.cli import main, parse_args


@pytest.mark.parametrize("flag", ["--steps", "--prompts-per-step", "--group-size", "--threads"])
@pytest.mark.parametrize("value", ["-5", "0", "abc"])
def test_bad_count_is_a_usage_error(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args([flag, value])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


def test_bad_count_leaves_the_report_folder_alone(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.txt").write_text("an earlier run")
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--steps", "-5"])
    assert (out / "summary.txt").read_text() == "an earlier run"


def test_good_counts_parse():
    args = parse_args(["--steps", "3", "--warmup-sft-steps", "0", "--group-size", "2"])
    assert (args.steps, args.warmup_sft_steps, args.group_size) == (3, 0, 2)


@pytest.mark.parametrize("flag, value", [("--lr", "-1"), ("--lr", "nan"), ("--seed", "-3")])
def test_bad_rate_or_seed_is_a_one_line_usage_error(flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args([flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"atropos-demo: error: argument {flag}: must be"), err


def test_each_model_fills_its_own_defaults():
    tiny = parse_args([])
    assert (tiny.model, tiny.steps, tiny.prompts_per_step, tiny.inference) == (
        "tiny",
        300,
        16,
        "engine",
    )
    assert tiny.out.name == "demo"
    smol = parse_args(["--model", "smollm2", "--control", "shuffled", "--steps", "6"])
    assert (smol.steps, smol.prompts_per_step, smol.warmup_sft_steps) == (6, 4, 0)
    assert (smol.inference, smol.out.name) == ("vllm", "demo-smollm2-control")


def test_smollm2_on_our_engine_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--inference", "engine"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "--model smollm2 runs on a real vLLM server" in err


def test_operands_pick_the_smollm2_question_range(capsys):
    from demo.presets.smollm2_arithmetic import OPERANDS, operands

    assert operands(parse_args(["--model", "smollm2"])) == OPERANDS
    assert operands(parse_args(["--model", "smollm2", "--operands", "10", "99"])) == (10, 99)
    for argv, message in (
        (["--operands", "10", "99"], "--operands applies to --model smollm2"),
        (["--model", "smollm2", "--operands", "9", "1"], "HIGH (1) is below LOW (9)"),
    ):
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and message in err, err


def test_the_calculator_task_has_its_own_defaults_and_folder():
    calc = parse_args(["--model", "smollm2", "--task", "calculator"])
    assert (calc.steps, calc.prompts_per_step, calc.group_size, calc.warmup_sft_steps) == (
        30,
        4,
        8,
        10,
    )
    assert (calc.inference, calc.out.name, calc.heldout) == ("vllm", "demo-smollm2-calculator", 64)
    control = parse_args(["--model", "smollm2", "--task", "calculator", "--control", "shuffled"])
    assert control.out.name == "demo-smollm2-calculator-control"


def test_the_calculator_task_needs_smollm2(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--task", "calculator"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "--task calculator runs with --model smollm2" in err
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--heldout", "8"])
    assert (
        exc.value.code == 2
        and "--heldout applies to --model smollm2 --task calculator" in capsys.readouterr().err
    )


def test_trainer_set_parses_into_validated_trainer_fields():
    args = parse_args(
        [
            "--trainer-set",
            "eps-high=100",
            "--trainer-set",
            "overlong=keep",
            "--trainer-set",
            "eps_low=0.5",
        ]
    )
    assert args.trainer_set == {"eps_high": 100.0, "overlong": "keep", "eps_low": 0.5}
    assert parse_args([]).trainer_set == {}


@pytest.mark.parametrize(
    "pair, why",
    [
        ("eps_low", "is not FIELD=VALUE"),
        ("no_such_field=1", "'no_such_field' is not a trainer field"),
        ("lr=0.1", "'lr' is set by the demo itself"),
        ("overlong=maybe", "overlong='maybe': Input should be 'keep', 'mask' or 'penalize'"),
        ("eps_low=2", "eps_low must be < 1"),
    ],
)
def test_bad_trainer_set_is_a_one_line_usage_error(pair, why, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--trainer-set", pair])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("atropos-demo: error: --trainer-set: ") and why in err, err


def test_auto_schedule_splits_the_cores_for_smollm2_arithmetic_only(monkeypatch):
    from demo.placement import trainer_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    split = parse_args(["--model", "smollm2"])
    assert split.schedule == "split"
    # the step breakdown's matmul peak is measured at the trainer's own thread count: one core's
    assert trainer_threads(split) == 1 and trainer_threads(parse_args(["--threads", "2"])) == 2
    assert parse_args(["--model", "smollm2", "--task", "calculator"]).schedule == "overlap"
    assert parse_args([]).schedule == "overlap"  # the tiny model
    assert parse_args(["--model", "smollm2", "--schedule", "turns"]).schedule == "turns"
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert parse_args(["--model", "smollm2"]).schedule == "overlap"  # one core: nothing to split


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs 2 CPU cores")
def test_under_split_what_the_launcher_starts_stays_off_the_trainers_cores(tmp_path):
    """vLLM's engine core polls in a busy loop; under split every process the demo's launcher starts
    inherits vLLM's half of the cores, and the trainer still pins itself to the other half."""
    import os
    import subprocess
    import sys

    from demo.placement import kept_on, launcher_cores, placement

    cores = sorted(os.sched_getaffinity(0))
    others = launcher_cores("split", cores)
    _, trainer = placement("split", 1, cores)
    assert others == cores[: len(cores) // 2] and not set(others) & set(trainer["cpu_cores"])
    assert launcher_cores("overlap", cores) is None and launcher_cores("turns", cores) is None
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    pin = (
        "import os; from example_trainer.config import parse_config; "
        "from example_trainer.model_setup import pin_cpu_cores; "
        f"cfg = parse_config(['--model-name', 'm', '--cpu-cores', "
        f"{', '.join(repr(str(c)) for c in trainer['cpu_cores'])}]); "
        "pin_cpu_cores(cfg.cpu_cores); print(sorted(os.sched_getaffinity(0)))"
    )
    with kept_on(others):
        child = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True)
        # a trainer started from there may still pin itself to cores its parent had left
        pinned = subprocess.run([sys.executable, "-c", pin], capture_output=True, text=True)
    assert child.stdout.strip() == str(others), child.stderr
    assert pinned.stdout.strip() == str(trainer["cpu_cores"]), pinned.stderr
    assert sorted(os.sched_getaffinity(0)) == cores  # the demo gets its cores back
    with kept_on(None):
        assert sorted(os.sched_getaffinity(0)) == cores

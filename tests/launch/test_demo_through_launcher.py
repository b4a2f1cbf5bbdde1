"""``atropos-demo`` is a topology run through the local backend: its topology carries the demo's flags,
and a short real demo run leaves the launcher's state file and logs beside the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atroposlib.launch.plan import build_plan
from demo.cli import parse_args
from demo.topology import demo_topology
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]


def _arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_demo_topology_carries_the_demo_flags(tmp_path):
    args = parse_args(
        ["--steps", "7", "--prompts-per-step", "6", "--group-size", "3", "--control", "shuffled"]
    )
    plan = build_plan(
        demo_topology(args, tmp_path / "warm", tmp_path), tmp_path, "local", gpus_here=0
    )
    assert [c.name for c in plan.components] == [
        "api",
        "inference-engine-0",
        "env-arithmetic-0",
        "trainer",
    ]
    env = plan.by_role("env")[0].argv
    assert _arg(env, "--env.total_steps") == "7" and _arg(env, "--env.group_size") == "3"
    assert (
        _arg(env, "--env.max_num_workers") == "3" and _arg(env, "--openai.model_name") == "policy"
    )
    trainer = plan.by_role("trainer")[0].argv
    assert _arg(trainer, "--batch-size") == "18" and _arg(trainer, "--control") == "shuffled"
    assert _arg(trainer, "--save-path") == str(tmp_path / "trainer")
    assert _arg(trainer, "--inference-urls") == plan.by_role("inference")[0].url
    assert plan.topology.supervision.max_restarts == 0  # a crash in the demo stops it


def test_trainer_set_reaches_the_trainers_command_line(tmp_path):
    args = parse_args(
        ["--trainer-set", "eps_high=0.2", "--trainer-set", "overlong=keep", "--control", "shuffled"]
    )
    plan = build_plan(
        demo_topology(args, tmp_path / "warm", tmp_path), tmp_path, "local", gpus_here=0
    )
    trainer = plan.by_role("trainer")[0].argv
    assert _arg(trainer, "--eps-high") == "0.2" and _arg(trainer, "--overlong") == "keep"
    assert "--eps-low" not in trainer  # only what was set


def test_the_smollm2_topology_serves_a_lora_adapter_from_vllm(tmp_path):
    from demo.lora import ADAPTER_NAME, BASE_NAME
    from demo.smollm2 import MODEL_CACHE

    args = parse_args(["--model", "smollm2", "--steps", "5", "--schedule", "overlap"])
    assert (args.inference, args.prompts_per_step, args.threads) == ("vllm", 4, 2)
    plan = build_plan(demo_topology(args, MODEL_CACHE, tmp_path), tmp_path, "local", gpus_here=0)
    assert [c.name for c in plan.components] == [
        "api",
        "inference-vllm-0",
        "env-chat-arithmetic-0",
        "trainer",
    ]
    server = plan.by_role("inference")[0]
    assert "--enable-lora" in server.argv and _arg(server.argv, "--served-model-name") == BASE_NAME
    assert plan.topology.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    env = plan.by_role("env")[0].argv
    assert env[1].endswith("chat_arithmetic_server.py")
    assert _arg(env, "--openai.model_name") == ADAPTER_NAME  # the env samples the adapter
    trainer = plan.by_role("trainer")[0].argv
    assert _arg(trainer, "--weight-refresh") == "lora"
    assert _arg(trainer, "--lora-adapter-name") == ADAPTER_NAME
    assert _arg(trainer, "--training-steps") == "5" and _arg(trainer, "--batch-size") == "32"
    assert _arg(env, "--env.on_policy") == "false" and _arg(env, "--env.min_operand") == "1"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in plan.topology.env  # overlap: vLLM binds itself
    # one OpenMP thread for the processes whose threads are not placed (vLLM's scheduler, the env)
    assert {**os.environ, **plan.topology.env}["OMP_NUM_THREADS"] == "1"
    assert _arg(trainer, "--torch-threads") == "2" and "--cpu-cores" not in trainer
    assert _arg(trainer, "--dtype") == "bfloat16"


def _smollm2_plan(tmp_path, *flags):
    from demo.smollm2 import MODEL_CACHE

    args = parse_args(["--model", "smollm2", *flags])
    return build_plan(demo_topology(args, MODEL_CACHE, tmp_path), tmp_path, "local", gpus_here=0)


def test_the_smollm2_schedules_place_vllm_and_the_trainer(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    plan = _smollm2_plan(tmp_path, "--schedule", "turns", "--operands", "10", "99")
    env, trainer = plan.by_role("env")[0].argv, plan.by_role("trainer")[0].argv
    assert _arg(env, "--env.on_policy") == "true"  # turns: each batch waits for the new weights
    assert (_arg(env, "--env.min_operand"), _arg(env, "--env.max_operand")) == ("10", "99")
    assert plan.topology.env["VLLM_CPU_OMP_THREADS_BIND"] == "0,1,2,3"  # every core, in turn
    assert _arg(trainer, "--torch-threads") == "2" and "--cpu-cores" not in trainer
    plan = _smollm2_plan(tmp_path, "--schedule", "split")
    env, trainer = plan.by_role("env")[0].argv, plan.by_role("trainer")[0].argv
    assert _arg(env, "--env.on_policy") == "false"  # split still overlaps
    assert plan.topology.env["VLLM_CPU_OMP_THREADS_BIND"] == "0,1"
    cores = trainer[trainer.index("--cpu-cores") + 1 : trainer.index("--cpu-cores") + 3]
    assert cores == ["2", "3"] and _arg(trainer, "--torch-threads") == "2"


def test_split_needs_two_cores_and_smollm2(monkeypatch, capsys):
    import os

    import pytest

    for argv, message in (
        (["--schedule", "split"], "--schedule split applies to --model smollm2"),
        (["--model", "smollm2", "--schedule", "split"], "needs 2 CPU cores or more"),
    ):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err


def test_the_calculator_topology_serves_the_warm_model_and_keeps_every_group(tmp_path):
    from demo.lora import ADAPTER_NAME
    from demo.presets.smollm2_calculator import SEQ_LEN

    args = parse_args(["--model", "smollm2", "--task", "calculator", "--steps", "4"])
    warm = tmp_path / "model" / "warm"
    plan = build_plan(demo_topology(args, warm, tmp_path), tmp_path, "local", gpus_here=0)
    assert [c.name for c in plan.components] == [
        "api",
        "inference-vllm-0",
        "env-calculator-0",
        "trainer",
    ]
    server = plan.by_role("inference")[0]
    assert _arg(server.argv, "--model") == str(warm) and "--enable-lora" in server.argv
    env = plan.by_role("env")[0].argv
    assert env[1].endswith("calculator_tool_env.py")
    assert _arg(env, "--env.tokenizer_name") == str(warm)
    assert _arg(env, "--env.data_path_to_save_groups") == str(tmp_path / "groups.jsonl")
    assert _arg(env, "--openai.model_name") == ADAPTER_NAME
    trainer = plan.by_role("trainer")[0].argv
    assert _arg(trainer, "--model-name") == str(warm) and _arg(trainer, "--seq-len") == str(SEQ_LEN)
    assert _arg(trainer, "--training-steps") == "4" and _arg(trainer, "--batch-size") == "32"


@pytest.mark.slow
def test_a_short_demo_runs_through_the_launcher(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo",
            "--out",
            str(out),
            "--steps",
            "3",
            "--prompts-per-step",
            "2",
            "--group-size",
            "4",
            "--warmup-sft-steps",
            "5",
            # the tiny model scores 0 on every reply in 3 steps: with the zero-advantage skip the
            # trainer would compute nothing, and the step-time line has no FLOPs to set against the peak
            "--trainer-set",
            "skip_zero_advantage=false",
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[demo] step    3/3" in done.stdout and "[demo] report:" in done.stdout
    assert "[launch]" not in done.stdout  # the demo prints its own lines only
    assert "[demo] step time: step " in done.stdout and "GFLOP/s matmul peak" in done.stdout
    state = json.loads((out / "launch-state.json").read_text())
    assert state["state"] == "finished" and state["topology"] == "atropos-demo"
    assert [row["step"] for row in read_jsonl(out / "metrics.jsonl")] == [
        1,
        2,
        3,
    ]
    for name in ("summary.txt", "reward_curve.png", "rollouts.html", "logs/trainer.log"):
        assert (out / name).exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["rl_wall_s"] > 0 and summary["control"] == "none"

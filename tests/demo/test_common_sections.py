"""One table of the flags every preset's env and trainer share: each preset's topology carries them
with the run's values, and adds only its own (the tiny preset halves the env's workers)."""

from __future__ import annotations

import pytest

from demo.cli import parse_args
from demo.common_sections import common_env_flags, run_trainer_flags
from demo.presets import PRESETS

OWN = {("tiny", "arithmetic"): {"max_num_workers"}}  # what a preset sets otherwise than the table


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
@pytest.mark.parametrize("schedule", ["overlap", "turns"])
def test_every_preset_carries_the_common_flags(preset, schedule, tmp_path):
    args = parse_args(
        ["--model", preset.model, "--task", preset.task, "--schedule", schedule, "--seed", "3"]
        + ["--steps", "5", "--prompts-per-step", "6", "--group-size", "2"]
    )
    model = tmp_path / "warm"
    parts = preset.topology_parts(args, model, tmp_path)
    (env,) = parts.envs
    common = common_env_flags(args, str(model), tmp_path)
    own = OWN.get((preset.model, preset.task), set())
    assert {k: env["flags"]["env"][k] for k in common if k not in own} == {
        k: v for k, v in common.items() if k not in own
    }
    assert env["flags"]["env"]["on_policy"] is (schedule == "turns")
    assert env["flags"]["openai"]["api_key"] == "x" and env["file"] == str(preset.env_file)
    trainer = run_trainer_flags(args, str(model), tmp_path, parts.trainer_flags["seq_len"])
    assert {k: parts.trainer_flags[k] for k in trainer} == trainer
    assert trainer["batch_size"] == 12 and trainer["save_path"] == str(tmp_path / "trainer")


def test_the_tiny_preset_halves_the_env_workers(tmp_path):
    args = parse_args(["--prompts-per-step", "6"])
    (env,) = PRESETS[0].topology_parts(args, tmp_path / "warm", tmp_path).envs
    assert env["flags"]["env"]["max_num_workers"] == 3

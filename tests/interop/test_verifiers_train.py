"""``serve`` of a verifiers v1 taskset (the multi-turn one) feeds our GRPO trainer two steps through a
real ``run-api``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "verifiers.v1", reason="verifiers is not installed (scripts/setup_verifiers.sh installs it)"
)

from tests.interop.helpers import train_two_steps


def test_serve_feeds_our_trainer_two_steps_through_run_api(
    tiny_engine, tiny_model_dir: Path, run_api, tmp_path: Path
):
    api = run_api("--store", "memory")
    env_flags = [
        "-m", "atroposlib.interop.verifiers", "serve",
        "--verifiers.env", "tests.interop.vf_tasks.count_game",
        "--verifiers.args", '{"rounds": 2}',
        "--verifiers.max_tokens_per_turn", "6",
    ]  # fmt: skip
    rows = train_two_steps(env_flags, tiny_model_dir, api.url, tiny_engine.url, tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["trained_tokens"] > 0 and r["reward_mean"] is not None for r in rows)

"""The held-out curve of ``bench/trl_comparison.py --tasks calculator``: which checkpoints get scored
(``trl_calculator.first_reaching``), the step and time a run reaches the held-out target
(``Run.heldout_to_target``), how the table reports both, and TRL's side saving an adapter every N steps
with the saving left out of its clock (``trl_grpo_chat.step_clock``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_modules():
    sys.path.insert(0, str(REPO))
    try:
        calc = importlib.import_module("bench.trl_calculator")
        runs = importlib.import_module("bench.trl_runs")
        comparison = importlib.import_module("bench.trl_comparison")
        yield calc, runs, comparison
    finally:
        sys.path.remove(str(REPO))


def _scorer(curve: dict[int, float]):
    asked: list[int] = []

    def score(step: int) -> float:
        asked.append(step)
        return curve[step]

    return score, asked


def test_the_first_step_reaching_the_target_is_found_with_every_second_checkpoint(bench_modules):
    calc, _, _ = bench_modules
    curve = {1: 0.1, 2: 0.2, 3: 0.5, 4: 0.7, 5: 0.85, 6: 0.9, 7: 0.6, 8: 1.0, 9: 1.0, 10: 1.0}
    score, asked = _scorer(curve)
    got = calc.first_reaching(10, score, 0.8, stride=2)
    # 2, 4 below; 6 reaches; 5 reaches too and 4 was already below: 5 is the first
    assert asked == [2, 4, 6, 5, 10]
    assert got == {2: 0.2, 4: 0.7, 5: 0.85, 6: 0.9, 10: 1.0}
    assert min(s for s, v in got.items() if v >= 0.8) == 5


def test_a_step_below_the_target_before_the_reaching_one_stops_the_look_back(bench_modules):
    calc, _, _ = bench_modules
    curve = {2: 0.3, 3: 0.4, 4: 0.95, 5: 0.9}
    score, asked = _scorer(curve)
    got = calc.first_reaching(5, score, 0.8, stride=2)
    assert asked == [2, 4, 3, 5]
    assert min(s for s, v in got.items() if v >= 0.8) == 4


def test_a_run_that_never_reaches_the_target_scores_every_stride_and_its_last_step(bench_modules):
    calc, _, _ = bench_modules
    score, asked = _scorer({s: 0.1 * s / 2 for s in range(1, 8)})
    got = calc.first_reaching(7, score, 0.8, stride=2)
    assert asked == [2, 4, 6, 7]
    assert all(v < 0.8 for v in got.values())


def test_heldout_to_target_is_the_step_and_its_end_time(bench_modules):
    _, runs, _ = bench_modules
    run = runs.Run("ours-split", "calculator", 0, ends=[10.0, 21.0, 33.0, 46.0, 60.0])
    run.heldout = {2: 0.5, 3: 0.81, 4: 0.7, 5: 1.0}
    assert run.heldout_to_target(0.8) == (3, 33.0)
    assert run.heldout_to_target(0.99) == (5, 60.0)
    assert run.heldout_to_target(1.01) == (None, None)
    assert runs.Run("trl", "calculator").heldout_to_target(0.8) == (None, None)


def test_the_table_gives_each_runs_curve_and_the_held_out_ratio(bench_modules):
    _, runs, comparison = bench_modules
    ours = runs.Run("ours-split", "calculator", 0, rewards=[0.5, 0.9, 0.9, 0.9, 0.9, 0.9])
    ours.ends, ours.step_s = [20.0 * i for i in range(1, 7)], [20.0] * 6
    ours.heldout = {2: 0.4, 3: 0.9, 4: 0.95, 6: 1.0}
    trl = runs.Run("trl", "calculator", 0, rewards=[0.5, 0.9, 0.9, 0.9, 0.9, 0.9])
    trl.ends, trl.step_s = [60.0 * i for i in range(1, 7)], [60.0] * 6
    trl.heldout = {2: 0.3, 4: 0.6, 6: 0.85, 5: 0.7}
    args = argparse.Namespace(steps=6, window=5, target=None)
    text = comparison.table("calculator", [ours, trl], args, {0: 0.1})
    assert "held-out success >= 0.8: 60 s @ step 3 (2:0.40 3:0.90 4:0.95 6:1.00)" in text
    assert "held-out success >= 0.8: 360 s @ step 6" in text
    # TRL's 360 s over our 60 s, steps 6 against 3
    assert "to held-out target x6.00 in time, steps 6 vs 3" in text
    assert "held-out target reached in 1/1 (median 60 s, step 3)" in text


def test_trls_clock_saves_every_nth_adapter_and_leaves_the_saving_out(bench_modules, tmp_path):
    transformers = pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location(
        "trl_grpo_chat", REPO / "bench" / "trl_grpo_chat.py"
    )
    assert spec is not None and spec.loader is not None
    chat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chat)

    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    rows: list[dict] = []
    marks: dict[str, float] = {}
    clock = chat.step_clock(rows, marks, save_every=2, save_root=tmp_path / "adapters")
    state = transformers.TrainerState()
    clock.on_train_begin(None, state, None)
    for step in (1, 2, 3, 4):
        state.global_step = step
        before = time.time()
        clock.on_step_end(None, state, None, model=model)
        assert rows[-1]["step"] == step and rows[-1]["time"] <= before + 1.0
    saved = sorted(p.name for p in (tmp_path / "adapters").iterdir())
    assert saved == ["step_0000002", "step_0000004"]
    assert (tmp_path / "adapters" / "step_0000002" / "model.safetensors").exists()
    assert marks["save_s"] > 0
    # step 3's time had step 2's save taken out of it: rows are at most the wall clock less the saves
    assert rows[2]["time"] <= time.time() - marks["save_s"] + 1e-3


def test_a_rows_schedule_and_its_report_line(bench_modules):
    _, runs, _ = bench_modules
    assert [runs.schedule_of(r) for r in ("ours", "ours-split", "ours-turns")] == [
        "overlap",
        "split",
        "turns",
    ]
    failed = runs.Run("trl", "calculator", 1, wall_s=90.0, error="trl failed (exit 3)\nlog tail")
    assert failed.report() == "[bench]   trl failed (exit 3) (1.5 min)"
    assert runs.Run("ours", "single", wall_s=30.0).report() == "[bench]   done (0.5 min)"


def test_a_run_missing_a_checkpoint_is_said_in_one_line(bench_modules, tmp_path):
    calc, _, _ = bench_modules
    for step in (1, 3):
        (tmp_path / f"step_{step:07d}").mkdir()
    assert calc._missing_checkpoints(tmp_path, 4) == f"no checkpoint of step(s) [2] in {tmp_path}"
    (tmp_path / "step_0000002").mkdir()
    assert calc._missing_checkpoints(tmp_path, 4) == ""

"""The engine in process: early delivery / continuous admission, and weight swaps between batches."""

from __future__ import annotations

import threading
import time

import pytest

from atroposlib.errors import InferenceUnavailable, ModelLoadError
from atroposlib.inference.config import EngineConfig
from atroposlib.inference.engine import InferenceEngine
from atroposlib.inference.sampling import RowParams


@pytest.fixture
def engine(tiny_model_dir):
    eng = InferenceEngine(
        EngineConfig(model_path=str(tiny_model_dir), torch_threads=1, batch_window_ms=1)
    ).start()
    yield eng
    eng.stop()


def _row(eng, text, max_tokens, **kw):
    return RowParams(
        prompt_ids=eng.tokenizer(text)["input_ids"],
        max_tokens=max_tokens,
        temperature=0.0,
        ignore_eos=True,
        **kw,
    )


def test_short_request_joining_a_long_batch_returns_first(engine):
    long_alone = engine.generate([_row(engine, "What is 1 + 2?", 120)])[0].token_ids
    short_alone = engine.generate([_row(engine, "Hello there", 4)])[0].token_ids
    long_fut = engine.submit([_row(engine, "What is 1 + 2?", 120)])
    time.sleep(0.05)
    short = engine.submit([_row(engine, "Hello there", 4)]).result(60)
    assert not long_fut.done()  # the short one did not wait for the long one
    assert short[0].token_ids == short_alone
    assert long_fut.result(60)[0].token_ids == long_alone


def test_drain_mode_reload_waits_for_the_batch_in_flight(tiny_model_dir_v2, tiny_model_dir):
    engine = InferenceEngine(
        EngineConfig(
            model_path=str(tiny_model_dir),
            torch_threads=1,
            batch_window_ms=1,
            refresh_mode="drain",
        )
    ).start()
    try:
        _drain_mode_checks(engine, tiny_model_dir_v2, tiny_model_dir)
    finally:
        engine.stop()


def _drain_mode_checks(engine, tiny_model_dir_v2, tiny_model_dir):
    text = "Count the letters in apple"
    old = engine.generate([_row(engine, text, 60)])[0].token_ids
    fut = engine.submit([_row(engine, text, 60)])
    time.sleep(0.05)
    version = {}
    t = threading.Thread(
        target=lambda: version.setdefault("v", engine.reload_weights(str(tiny_model_dir_v2)))
    )
    t.start()
    assert fut.result(60)[0].token_ids == old  # finished on the old weights
    t.join(60)
    assert version["v"] == 1 and engine.weights_version == 1
    new = engine.generate([_row(engine, text, 60)])[0].token_ids
    assert new != old
    with pytest.raises(ModelLoadError):
        engine.reload_weights(str(tiny_model_dir / "missing"))
    assert engine.weights_version == 1


def test_keep_mode_reload_swaps_between_decode_steps_without_waiting(
    engine, tiny_model_dir, tiny_model_dir_v2
):
    """The refresh no longer waits for the rows in flight: it is swapped in between two decode
    steps, the row goes on with the new weights, and its tokens say which weights sampled them."""
    text = "Count the letters in apple"
    old = engine.generate([_row(engine, text, 300)])[0].token_ids
    started = threading.Event()
    job = engine.submit_job(
        [_row(engine, text, 300)],
        on_progress=lambda results: len(results[0].token_ids) >= 10 and started.set(),
    )
    fut = job.future
    assert started.wait(60)  # 10 tokens generated on the old weights
    assert engine.reload_weights(str(tiny_model_dir_v2), version=5) == 5
    assert not fut.done()  # the refresh did not wait for the 300-token row
    row = fut.result(120)[0]
    spans = row.weight_versions()
    assert [s["version"] for s in spans] == ["0", "5"] and spans[0]["start"] == 0
    assert spans[0]["end"] == spans[1]["start"] > 0 and spans[1]["end"] == len(row.token_ids)
    cut = spans[1]["start"]
    assert row.token_ids[:cut] == old[:cut]  # the old weights' greedy tokens up to the swap
    assert row.token_ids != old
    assert engine.metrics.rows_across_refresh._value.get() >= 1
    with pytest.raises(ModelLoadError):  # a bad folder: nothing swapped, the label stays
        engine.reload_weights(str(tiny_model_dir / "missing"))
    assert engine.weights_version == 5
    engine.reload_weights(str(tiny_model_dir), version=6)  # idle: swapped at once


def test_rows_record_the_weights_version_that_generated_them(engine, tiny_model_dir):
    first = engine.generate([_row(engine, "Hello there", 5)])[0]
    assert first.weight_versions() == [{"version": "0", "start": 0, "end": 5}]
    assert engine.reload_weights(str(tiny_model_dir), version=7) == 7  # the trainer's label
    engine.set_weights_version(9)  # a label set on its own (after a LoRA load)
    second = engine.generate([_row(engine, "Hello there", 3)])[0]
    assert second.weight_versions() == [{"version": "9", "start": 0, "end": 3}]
    assert engine.reload_weights(str(tiny_model_dir)) == 10  # unlabelled: one more


def test_queue_full_raises_inference_unavailable(tiny_model_dir):
    eng = InferenceEngine(
        EngineConfig(model_path=str(tiny_model_dir), torch_threads=1, max_queue=1)
    )
    try:  # worker not started: nothing drains the queue
        eng.submit([_row(eng, "a", 1)])
        with pytest.raises(InferenceUnavailable, match="queue is full"):
            eng.submit([_row(eng, "b", 1)])
    finally:
        eng.stop()


def test_default_threads_leave_cores_for_other_processes(tiny_model_dir):
    import os

    import torch

    from atroposlib.inference.config import default_torch_threads

    assert [default_torch_threads(n) for n in (1, 2, 3, 16)] == [1, 1, 1, 8]
    before = torch.get_num_threads()
    try:
        InferenceEngine(EngineConfig(model_path=str(tiny_model_dir)))  # no torch_threads given
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
    finally:
        torch.set_num_threads(before)

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


def test_reload_waits_for_the_batch_in_flight(engine, tiny_model_dir_v2, tiny_model_dir):
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

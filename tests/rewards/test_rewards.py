"""Reward functions, the registry and weighted combination."""

from __future__ import annotations

import pytest

from atroposlib.errors import ConfigError
from atroposlib.rewards import (
    call_reward_fn,
    combine,
    get_reward_fn,
    length_penalty,
    math_accuracy,
    r1_format,
    register,
    registry,
    repetition_penalty,
)


def test_math_accuracy_uses_math_verify():
    texts = [
        "<think>2+2 is 4</think> The answer is \\boxed{4}",
        "\\boxed{5}",
        "<think>4</think> I say 1/2",
        "nothing",
    ]
    assert math_accuracy(texts, answers=["4", "4", "0.5", "4"]) == [1.0, 0.0, 1.0, 0.0]


def test_format_functions():
    assert r1_format(
        ["<think>a</think> b", "<think>a</think>", "b", "<think>a</think> x <think>"]
    ) == [1.0, 0.0, 0.0, 0.0]
    assert get_reward_fn("format")(["A: 4", "4"], pattern=r"^A: \d+$") == [1.0, 0.0]


def test_penalties():
    assert length_penalty(["x" * 40, "x" * 75, "x" * 200], max_length=100) == [0.0, -0.5, -1.0]
    assert repetition_penalty(["a b c d e", "a b a b a b"], ngram=2) == [0.0, -0.6]


def test_combine_weights_and_registry():
    reward = combine({"math_accuracy": 1.0, "r1_format": 0.5, "length_penalty": 1.0})
    scores = reward(
        ["<think>ok</think> \\boxed{7}", "it is 8", "x" * 90], answers=["7"], max_length=100
    )
    assert scores == pytest.approx([1.5, 0.0, -0.8])
    with pytest.raises(ConfigError, match="did you mean 'math_accuracy'"):
        get_reward_fn("math_acuracy")

    @register("test_always_one")
    def always_one(completions):
        return [1.0] * len(completions)

    assert call_reward_fn(get_reward_fn("test_always_one"), ["a", "b"], answers=["ignored"]) == [
        1.0,
        1.0,
    ]
    with pytest.raises(ValueError, match="returned 1 scores for 2"):
        call_reward_fn(lambda completions: [1.0], ["a", "b"])


def test_atropos_style_registry_create_binds_params():
    fn = registry.create({"type": "format", "params": {"pattern": r"\\boxed"}})
    assert fn(["\\boxed{1}", "1"]) == [1.0, 0.0]
    assert registry.create("r1_format")(["<think>a</think> b"]) == [1.0]
    with pytest.raises(ConfigError, match="unknown reward function"):
        registry.create({"type": "nope"})


def test_failing_reward_function_scores_zero_logs_once_then_summarises(caplog):
    from atroposlib.rewards import RewardFunction

    class Broken(RewardFunction):
        def compute(self, completions, **kwargs):
            raise ValueError("no answer tag")

    r = Broken(weight=2.0)
    with caplog.at_level("WARNING", logger="atroposlib.rewards.reward_function"):
        results = [r(["a", "b"]) for _ in range(8)]
    assert results == [[0.0, 0.0]] * 8 and r.failures == 8
    records = [rec for rec in caplog.records if "broken" in rec.getMessage()]
    assert sum(rec.exc_info is not None for rec in records) == 1  # one traceback, the first
    assert [rec.getMessage().split(" has failed ")[1].split(" ")[0] for rec in records[1:]] == [
        "2",
        "4",
        "8",
    ]


def test_the_registry_builds_on_reward_function_never_the_reverse():
    """No circle: ``reward_function`` (what a reward is) imports nothing of the registry, at any
    depth (no function-local import either); the registry imports it."""
    import ast
    from pathlib import Path

    import atroposlib.rewards as rewards

    def imported(name: str) -> set[str]:
        tree = ast.parse((Path(rewards.__file__).parent / f"{name}.py").read_text())
        return {
            n.module
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module is not None
        } | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    assert not {m for m in imported("reward_function") if m.startswith("atroposlib.")}
    assert "atroposlib.rewards.reward_function" in imported("registry")


def test_the_atropos_paths_re_export_every_reward_name():
    """``atroposlib.envs.reward_fns`` (and its ``registry`` module) re-export ``atroposlib.rewards``'s
    names. Checked in a fresh interpreter: once ``reward_fns.registry`` the module is imported, the
    package's ``registry`` attribute names that module (Python's rule, as in Atropos)."""
    import subprocess
    import sys

    script = """
import importlib
for thin, real_name in (
    ("atroposlib.envs.reward_fns", "atroposlib.rewards"),
    ("atroposlib.envs.reward_fns.registry", "atroposlib.rewards.registry"),
):
    module, real = importlib.import_module(thin), importlib.import_module(real_name)
    assert list(module.__all__) == list(real.__all__), thin
    assert all(getattr(module, n) is getattr(real, n) for n in real.__all__), thin
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]

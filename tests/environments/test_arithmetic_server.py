"""The demo's env end to end against a fake server speaking the engine's protocol over real HTTP."""

from __future__ import annotations

import random

import pytest

from atroposlib.testing import check_env
from atroposlib.utils.arithmetic_task import Problem, all_problems, make_problem, score_completion


def _sum_of(prompt_text: str) -> int:
    a, b = prompt_text.strip().rstrip("=").split("+")
    return int(a) + int(b)


def test_groups_carry_tokens_masks_logprobs_and_correct_scores():
    from arithmetic_server import ArithmeticEnv

    def responder(prompt_text, body):  # even choices answer right, odd ones answer wrong
        right = _sum_of(prompt_text)
        return str(right) if body["choice_index"] % 2 == 0 else str(right + 1)

    groups = check_env(ArithmeticEnv, responder=responder, items=2, env_overrides={"group_size": 4})
    assert len(groups) == 2
    for g in groups:
        assert g["scores"] == [1.0, 0.0, 1.0, 0.0]
        for toks, masks, lps in zip(g["tokens"], g["masks"], g["inference_logprobs"], strict=False):
            assert len(toks) == len(masks) == len(lps)
            n_prompt = sum(1 for m in masks if m == -100)
            assert 0 < n_prompt < len(toks)  # prompt masked, completion trained
            assert all(lp == 1.0 for lp in lps[:n_prompt])
        assert g["messages"][0][0]["content"].endswith("=")


def test_task_generator_and_scorer():
    rng = random.Random(0)
    probs = [make_problem(rng) for _ in range(200)]
    assert all(0 <= p.a <= 9 and 0 <= p.b <= 9 for p in probs)
    assert len(all_problems()) == 100
    p = Problem(3, 5)
    assert (p.prompt, p.answer) == ("3+5=", "8")
    assert score_completion("8", p) == 1.0
    assert score_completion(" 8<|im_end|>", p) == 1.0
    assert score_completion("8\nmore", p) == 1.0
    assert score_completion("80", p) == 0.0
    assert score_completion("", p) == 0.0


@pytest.mark.parametrize("bad", ["max_operand", "temperature"])
def test_config_refuses_bad_values(bad):
    from arithmetic_server import ArithmeticEnvConfig
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=bad):
        ArithmeticEnvConfig(**{bad: 0})

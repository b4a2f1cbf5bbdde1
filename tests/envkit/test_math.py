"""math_scoring: boxed extraction, math-verify equivalence, Atropos's length penalty."""

import pytest

from atroposlib.envkit.math_scoring import (
    all_same,
    extract_boxed,
    grade_math_group,
    gsm8k_final_answer,
    length_penalised_scores,
    strip_thinking,
    verify_math,
)


def test_extract_boxed_takes_last_and_balances_braces():
    assert extract_boxed(r"first \boxed{1} then \boxed{\frac{3}{4}} end") == r"\frac{3}{4}"
    assert extract_boxed("no box here") is None
    assert extract_boxed(r"\boxed{unclosed") is None


def test_strip_thinking_and_gsm8k_answer():
    assert strip_thinking("<think>a</think>b</think>c") == "c"
    assert strip_thinking("plain") == "plain"
    assert gsm8k_final_answer("steps...\n#### 1,234") == "1234"


@pytest.mark.parametrize(
    "response,gold,expected",
    [
        (r"<think>maybe 17</think> so \boxed{18}", "18", True),
        (r"\boxed{18.0}", "18", True),
        (r"\boxed{\frac{36}{2}}", "18", True),
        (r"\boxed{17}", "18", False),
        ("the answer is 18", "18", False),  # no boxed answer: not accepted
        (
            r"<think>\boxed{18}</think> I give up",
            "18",
            False,
        ),  # boxed only inside the thinking block
        (r"\boxed{138/583}", "138/583", True),
    ],
)
def test_verify_math(response, gold, expected):
    assert verify_math(response, gold) is expected


def test_verify_math_unparseable_gold_is_none():
    assert verify_math(r"\boxed{1}", "") is None


def test_length_penalty_only_when_all_correct():
    assert length_penalised_scores([True, False], [900, 10], 1000) == [1.0, -1.0]
    scores = length_penalised_scores([True, True, True, True], [100, 500, 750, 2000], 1000)
    assert scores == [1.0, 1.0, 0.5, 0.0]
    with pytest.raises(ValueError):
        length_penalised_scores([True], [1, 2], 10)


def test_all_same():
    assert all_same([1.0, 1.0]) and not all_same([1.0, -1.0])


def test_grade_math_group_scores_and_skips_an_unparseable_gold():
    correct, scores = grade_math_group([r"\boxed{18}", r"\boxed{17}"], "18", [10, 10], 100)
    assert correct == [True, False] and scores == [1.0, -1.0]
    # all right: the length penalty applies (no penalty up to half of max_token_length)
    correct, scores = grade_math_group([r"\boxed{18}", r"\boxed{18.0}"], "18", [50, 75], 100)
    assert correct == [True, True] and scores == [1.0, 0.5]
    assert grade_math_group([r"\boxed{18}", r"\boxed{1}"], "", [10, 10], 100) is None

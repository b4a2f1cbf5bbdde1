"""The pretrained-model demo's env: chat questions, free-text replies graded by their last integer,
run end to end against a fake server speaking the OpenAI protocol over real HTTP."""

from __future__ import annotations

import re

import pytest

from atroposlib.errors import ConfigError
from atroposlib.testing import check_env
from atroposlib.utils.chat_arithmetic_task import (
    ChatProblem,
    last_integer,
    score_reply,
    split_problems,
)


def _operands(prompt_text: str) -> tuple[int, int]:
    a, b = re.findall(r"What is (\d+) \+ (\d+)\?", prompt_text)[-1]
    return int(a), int(b)


def test_groups_carry_chat_tokens_masks_and_free_text_scores():
    from chat_arithmetic_server import ChatArithmeticEnv

    def responder(prompt_text, body):
        a, b = _operands(prompt_text)
        replies = [
            f"{a} + {b} = {a + b}.",  # right
            f"To add {a} and {b}, we first",  # cut off before the sum
            f"The sum is {a + b}, I think",  # right, in other words
            f"{a} + {b} = {a + b + 1}",  # wrong
        ]
        return replies[body["choice_index"] % 4]

    groups = check_env(
        ChatArithmeticEnv, responder=responder, items=2, env_overrides={"group_size": 4}
    )
    assert len(groups) == 2
    for g in groups:
        assert g["scores"] == [1.0, 0.0, 1.0, 0.0]
        question = g["messages"][0][0]
        assert question["role"] == "user" and question["content"].startswith("What is ")
        for toks, masks, msgs in zip(g["tokens"], g["masks"], g["messages"], strict=True):
            n_prompt = sum(1 for m in masks if m == -100)
            assert 0 < n_prompt < len(toks) == len(masks)
            assert msgs[-1]["role"] == "assistant"


def test_training_items_never_include_a_held_out_pair():
    import asyncio

    from chat_arithmetic_server import ChatArithmeticConfig, ChatArithmeticEnv

    cfg = ChatArithmeticConfig(held_out=30, seed=3)
    env = ChatArithmeticEnv.__new__(ChatArithmeticEnv)
    env.config = cfg

    async def draw() -> list[ChatProblem]:
        await env.setup()
        return [await env.get_next_item() for _ in range(300)]

    drawn = set(asyncio.run(draw()))
    _, held_out = split_problems(1, 9, 30, 3)
    assert drawn and not drawn & set(held_out)


@pytest.mark.parametrize(
    "reply, value",
    [
        ("3 + 5 = 8.", 8),
        ("8 is the sum, since 3 + 5 = 9", 9),
        ("The answer is 1,024", 1024),
        ("minus: -4", -4),
        ("no number here", None),
    ],
)
def test_last_integer(reply, value):
    assert last_integer(reply) == value


def test_score_reply_and_split():
    p = ChatProblem(3, 5)
    assert p.question == "What is 3 + 5?" and p.answer == 8
    assert score_reply("3 + 5 = 8", p) == 1.0
    assert score_reply("8, because 3 + 5", p) == 0.0
    train, held = split_problems(1, 9, 20, 0)
    assert len(held) == 20 and len(train) == 61 and not set(train) & set(held)
    assert split_problems(1, 9, 20, 0) == (train, held)  # the same seed, the same split
    assert split_problems(1, 9, 20, 1)[1] != held
    with pytest.raises(ValueError, match="held_out must be between 0 and 80"):
        split_problems(1, 9, 81, 0)


def test_bad_settings_are_refused():
    import asyncio

    from chat_arithmetic_server import ChatArithmeticConfig, ChatArithmeticEnv
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="max_operand"):
        ChatArithmeticConfig(min_operand=5, max_operand=4)
    env = ChatArithmeticEnv.__new__(ChatArithmeticEnv)
    env.config = ChatArithmeticConfig(held_out=500)
    with pytest.raises(ConfigError, match="held_out"):
        asyncio.run(env.setup())

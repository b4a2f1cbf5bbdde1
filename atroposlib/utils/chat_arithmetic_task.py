"""The pretrained-model demo's task: small additions asked in plain chat, answered in free text.

A question is ``What is a + b?`` with no answer format imposed; the reply is graded by the last integer
in it (``"3 + 5 = 8."`` is right, ``"8 is the sum, since 3 + 5 = 9"`` is not, and a reply cut off before
it names the sum is wrong). Pairs are split once, by a seed, into training pairs and held-out pairs, so
the greedy accuracy measured before and after training is on questions the policy never trained on.

Pure Python: the env (``environments/chat_arithmetic_server.py``) and the demo's held-out evaluation
both use it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_INTEGER = re.compile(r"-?\d+")


@dataclass(frozen=True)
class ChatProblem:
    a: int
    b: int

    @property
    def question(self) -> str:
        return f"What is {self.a} + {self.b}?"

    @property
    def answer(self) -> int:
        return self.a + self.b

    def messages(self) -> list[dict[str, str]]:
        """The conversation sent to the model: one user turn (the model's own chat template adds its
        default system prompt)."""
        return [{"role": "user", "content": self.question}]


def last_integer(text: str) -> int | None:
    """The last integer written in ``text``, thousands separators allowed (``None`` when there is
    none); the calculator task (``envkit.calculator_task``) reads its final answers with it too."""
    found = _INTEGER.findall(text.replace(",", ""))
    return int(found[-1]) if found else None


def score_reply(reply: str, problem: ChatProblem) -> float:
    """1.0 when the last integer of the reply is the sum, else 0.0."""
    return 1.0 if last_integer(reply) == problem.answer else 0.0


def split_problems(
    low: int, high: int, held_out: int, seed: int
) -> tuple[list[ChatProblem], list[ChatProblem]]:
    """(training pairs, held-out pairs) over all ordered pairs with operands in ``low..high``."""
    pairs = [ChatProblem(a, b) for a in range(low, high + 1) for b in range(low, high + 1)]
    if not 0 <= held_out < len(pairs):
        raise ValueError(
            f"held_out must be between 0 and {len(pairs) - 1} for operands {low}..{high}, "
            f"got {held_out}"
        )
    random.Random(seed).shuffle(pairs)
    return pairs[held_out:], pairs[:held_out]

"""The demo's procedural task: single-digit addition, answered as a bare number.

Pure Python, no model or server. It lives in ``utils`` (the shared bottom layer) because both sides use
it: the env (``environments/arithmetic_server.py``) draws problems and scores completions with it, and
the demo's supervised warm-up (``demo/tiny_model.py``) draws gold demonstrations from the same
generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    a: int
    b: int

    @property
    def prompt(self) -> str:
        return f"{self.a}+{self.b}="

    @property
    def answer(self) -> str:
        return str(self.a + self.b)


def make_problem(rng: random.Random, max_operand: int = 9) -> Problem:
    return Problem(rng.randint(0, max_operand), rng.randint(0, max_operand))


def all_problems(max_operand: int = 9) -> list[Problem]:
    return [Problem(a, b) for a in range(max_operand + 1) for b in range(max_operand + 1)]


def score_completion(completion: str, problem: Problem) -> float:
    """1.0 when the completion (up to the first newline or end marker) is exactly the sum, else 0.0."""
    text = completion.split("<|im_end|>")[0].split("\n")[0].strip()
    return 1.0 if text == problem.answer else 0.0

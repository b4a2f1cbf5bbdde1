"""A small deterministic set of example groups, for ``view-run --demo``, the docs screenshots and tests.

The groups look like what an arithmetic env sends: a ChatML-ish prompt shared by the group, completions
with scores, masks (-100 on the prompt), inference logprobs and advantages. One completion is hostile
(``<script>`` and an ``<img onerror>``) so every viewer can show that model text stays text.
``encode`` turns text into token ids; by default the UTF-8 bytes (ids 0-255), or pass a tokenizer's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, Optional

Encoder = Callable[[str], list[int]]

HOSTILE_COMPLETION = (
    "The answer is 12 <script>window.__pwned = 1; document.title = 'pwned'</script>"
    ' <img src=x onerror="window.__pwned = 2"> ${window.__pwned = 3}'
)

_PROBLEMS = [
    ("What is 7 + 5?", "12", ["12", "The answer is **12**.", "13", HOSTILE_COMPLETION]),
    ("What is 9 - 4?", "5", ["5", "It is 5", "4", "Let me think... `9 - 4 = 6`"]),
    ("What is 3 * 3?", "9", ["9", "nine (9)", "6", "33"]),
    ("What is 8 + 8?", "16", ["16", "16", "18", "I do not know"]),
]


def _bytes_encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def _score(answer: str, completion: str) -> float:
    words = (
        completion.replace("*", " ").replace("`", " ").replace("(", " ").replace(")", " ").split()
    )
    if answer in words:
        return 1.0
    return -1.0 if any(w.isdigit() for w in words) else 0.0


def make_group(
    question: str,
    answer: str,
    completions: list[str],
    *,
    encode: Optional[Encoder] = None,
    env_name: Optional[str] = "arithmetic",
    env_id: int = 0,
    policy_version: int = 0,
    rng: Optional[random.Random] = None,
    system: str = "Answer with a number.",
) -> dict[str, Any]:
    """One scored group (``ScoredDataGroup`` shape, plus ``env_name``) for ``question``."""
    enc = encode or _bytes_encode
    rng = rng or random.Random(0)
    prompt_text = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    prompt_ids = enc(prompt_text)
    tokens, masks, logprobs, messages, scores = [], [], [], [], []
    for c in completions:
        ids = enc(prompt_text + c + "<|im_end|>")
        n_prompt = len(prompt_ids) if ids[: len(prompt_ids)] == prompt_ids else 0
        tokens.append(ids)
        masks.append([-100] * n_prompt + ids[n_prompt:])
        logprobs.append(
            [1.0] * n_prompt + [round(math.log(rng.uniform(0.05, 1.0)), 4) for _ in ids[n_prompt:]]
        )
        messages.append(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
                {"role": "assistant", "content": c},
            ]
        )
        scores.append(_score(answer, c))
    mean = sum(scores) / len(scores)
    advantages = [[s - mean] * len(t) for s, t in zip(scores, tokens, strict=True)]
    group: dict[str, Any] = {
        "tokens": tokens,
        "masks": masks,
        "scores": scores,
        "messages": messages,
        "inference_logprobs": logprobs,
        "advantages": advantages,
        "env_id": env_id,
        "policy_version": policy_version,
        "group_id": f"{env_name or 'env'}-{abs(hash(question)) % 10**8:08d}",
    }
    if env_name is not None:
        group["env_name"] = env_name
    return group


def sample_groups(
    encode: Optional[Encoder] = None, with_messages: bool = True
) -> list[dict[str, Any]]:
    """Four arithmetic groups of four completions (the first holds ``HOSTILE_COMPLETION``)."""
    rng = random.Random(1234)
    out = []
    for i, (q, a, comps) in enumerate(_PROBLEMS):
        g = make_group(
            q,
            a,
            comps,
            encode=encode,
            policy_version=i // 2,
            rng=rng,
            env_name="arithmetic" if i < 3 else "arithmetic_hard",
            env_id=0 if i < 3 else 1,
        )
        g["group_id"] = f"sample-{i}"
        if not with_messages:
            del g["messages"]
        out.append(g)
    return out


__all__ = ["HOSTILE_COMPLETION", "make_group", "sample_groups"]

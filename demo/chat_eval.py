"""Greedy accuracy of a chat model (optionally with a LoRA adapter) on held-out chat problems.

The pretrained-model demo measures the policy before and after training on the same held-out
questions: the base model, then the base model with the trainer's last adapter. Questions go through the
model's chat template; replies are generated greedily in one left-padded batch with transformers
(``demo.chat_policy``) and graded by the task's own ``score_reply``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch

from atroposlib.utils.chat_arithmetic_task import ChatProblem, score_reply
from demo.chat_policy import load_chat_policy


@torch.no_grad()
def chat_greedy_accuracy(
    model_dir: str | Path,
    problems: Sequence[ChatProblem],
    max_new_tokens: int,
    adapter_dir: Optional[str | Path] = None,
) -> tuple[float, list[tuple[str, str, bool]]]:
    """(fraction correct, [(question, reply, correct)]) of greedy replies to ``problems``."""
    model, tok = load_chat_policy(model_dir, adapter_dir)
    prompts = [
        tok.apply_chat_template(p.messages(), tokenize=False, add_generation_prompt=True)
        for p in problems
    ]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    out = model.generate(
        **enc,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    rows = []
    for p, ids in zip(problems, out[:, enc["input_ids"].shape[1] :], strict=True):
        reply = tok.decode(ids, skip_special_tokens=True)
        rows.append((p.question, reply, bool(score_reply(reply, p))))
    return sum(ok for _, _, ok in rows) / max(1, len(rows)), rows

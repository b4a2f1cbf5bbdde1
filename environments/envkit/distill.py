"""Pure helpers for teacher distillation: tokenizer identity and top-k logprob bookkeeping.

Distillation arrays are per sequence, per token: ``distill_token_ids[i][p]`` and ``distill_logprobs[i][p]``
are the teacher's top-k next-token ids and logprobs for the distribution that predicted token ``p``. They
are only meaningful when teacher and student share one tokenizer, so a mismatch is refused loudly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from atroposlib.errors import TokenizerMismatch


def check_same_tokenizer(student: Any, teacher: Any, student_name: str, teacher_name: str) -> None:
    """Raise ``TokenizerMismatch`` (saying how they differ) unless both map every token to the same id."""
    student_vocab, teacher_vocab = student.get_vocab(), teacher.get_vocab()
    if student_vocab == teacher_vocab and student.eos_token_id == teacher.eos_token_id:
        return
    differing = sorted(
        tok
        for tok in set(student_vocab) | set(teacher_vocab)
        if student_vocab.get(tok) != teacher_vocab.get(tok)
    )
    examples = ", ".join(
        f"{tok!r}: {student_vocab.get(tok)} vs {teacher_vocab.get(tok)}" for tok in differing[:3]
    )
    raise TokenizerMismatch(
        f"teacher tokenizer {teacher_name} ({len(teacher_vocab)} tokens) differs from the student's "
        f"{student_name} ({len(student_vocab)} tokens) in {len(differing)} entries (e.g. {examples}); "
        f"eos {student.eos_token_id} vs {teacher.eos_token_id}. Distillation needs the same tokenizer: "
        "serve a teacher of the same family or set --env.teacher_tokenizer_name correctly."
    )


def text_to_id(tokenizer: Any) -> dict[str, int]:
    """Decoded text of each single token -> its id (the lowest id wins when two decode alike).

    OpenAI-shaped ``top_logprobs`` are keyed by decoded token text; this maps them back to ids."""
    mapping: dict[str, int] = {}
    for token_id in sorted(tokenizer.get_vocab().values()):
        mapping.setdefault(tokenizer.decode([token_id], skip_special_tokens=False), token_id)
    return mapping


def top_k_entry(
    top_logprobs: dict[str, float], ids: dict[str, int], k: int
) -> tuple[list[int], list[float]]:
    """The k most likely (id, logprob) pairs of one position, most likely first."""
    ranked = sorted(top_logprobs.items(), key=lambda kv: kv[1], reverse=True)[:k]
    pairs = [(ids[text], float(lp)) for text, lp in ranked if text in ids]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def positions_to_score(masks: Sequence[int]) -> list[int]:
    """Positions whose token was generated (trained on); position 0 has no predecessor."""
    return [p for p, mask in enumerate(masks) if mask != -100 and p > 0]


def top_k_from_prompt_logprobs(entry: dict[str, Any], k: int) -> tuple[list[int], list[float]]:
    """The k most likely (id, logprob) pairs of one vLLM ``prompt_logprobs`` entry
    (``{"<id>": {"logprob": f, "rank": r, ...}}``, which also holds the actual token at any rank)."""
    ranked = sorted(entry.items(), key=lambda kv: kv[1]["logprob"], reverse=True)[:k]
    return [int(tid) for tid, _ in ranked], [float(info["logprob"]) for _, info in ranked]

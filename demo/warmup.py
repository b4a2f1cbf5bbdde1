"""Supervised warm-up: a few hundred SFT steps on gold demonstrations before RL.

A randomly initialised tiny model never samples a correct answer, so GRPO has no signal (every group
scores 0). This phase trains on (prompt, gold completion) pairs drawn from the env's own generator, with
the loss on completion tokens only (the completion ends with the tokenizer's EOS so the model learns to
stop), until greedy accuracy is roughly 30%; RL takes it from there. ``greedy_accuracy`` measures it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch

from atroposlib.utils.hf_compat import dtype_kwargs

Pair = tuple[str, str]


def _encode_pairs(
    tokenizer, pairs: Sequence[Pair]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    eos = tokenizer.eos_token or ""
    rows, labels = [], []
    for prompt, completion in pairs:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c = tokenizer(completion + eos, add_special_tokens=False)["input_ids"]
        rows.append(p + c)
        labels.append([-100] * len(p) + c)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id or 0
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    lab = torch.tensor([r + [-100] * (width - len(r)) for r in labels])
    attn = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, lab, attn


def sft_warmup(
    model_dir: str | Path,
    out_dir: str | Path,
    sample_pairs: Callable[[random.Random, int], list[Pair]],
    *,
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> Path:
    """Train ``model_dir`` on pairs from ``sample_pairs(rng, n)`` and save the result to ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, **dtype_kwargs(torch.float32))
    tok = AutoTokenizer.from_pretrained(model_dir)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        ids, lab, attn = _encode_pairs(tok, sample_pairs(rng, batch_size))
        loss = model(input_ids=ids, attention_mask=attn, labels=lab).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@torch.no_grad()
def greedy_accuracy(
    model_dir: str | Path, problems: Iterable, score: Callable, max_new_tokens: int = 4
) -> float:
    """Fraction of ``problems`` (objects with ``.prompt``) whose greedy completion scores 1."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, **dtype_kwargs(torch.float32)).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    problems = list(problems)
    correct = 0.0
    for p in problems:
        ids = torch.tensor([tok(p.prompt, add_special_tokens=False)["input_ids"]])
        out = model.generate(
            ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
        )
        text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
        correct += score(text, p)
    return correct / max(len(problems), 1)

"""Supervised warm-up of a chat model on multi-turn conversations (a LoRA, merged into the weights).

For a pretrained model that never produces the format a task needs (SmolLM2-135M-Instruct never writes
a ``<tool_call>`` on its own: 0 of 416 sampled first turns, measured), a few supervised steps on gold
conversations that the env itself generates give RL something to start from. The loss is on the
assistant turns only (their text and the end-of-turn token); everything else is masked.

Conversations are tokenized the way the managed server builds a multi-turn sequence: the chat template
is rendered up to each assistant turn and only the new piece is tokenized and appended, so the warm-up
sees the token boundaries RL sequences have. The adapter (same rank and target modules as the RL run)
is merged into the weights and saved as a plain model folder, which vLLM serves and the RL trainer
starts from.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from atroposlib.type_definitions import MASK_IGNORE
from atroposlib.utils.hf_compat import dtype_kwargs

Conversation = list[dict[str, Any]]


def encode_conversation(
    tok: Any, messages: Sequence[dict[str, Any]]
) -> tuple[list[int], list[int]]:
    """(token ids, labels): assistant text and its end-of-turn token labelled, the rest ``-100``."""
    ids: list[int] = []
    labels: list[int] = []
    rendered = ""
    end = tok.eos_token or ""
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = tok.apply_chat_template(
            list(messages[:k]), tokenize=False, add_generation_prompt=True
        )
        if not prefix.startswith(rendered):
            raise ValueError(f"the chat template re-renders earlier turns differently (turn {k})")
        piece = tok.encode(prefix[len(rendered) :], add_special_tokens=False)
        reply = tok.encode(str(message["content"]) + end, add_special_tokens=False)
        ids += piece + reply
        labels += [MASK_IGNORE] * len(piece) + reply
        rendered = prefix + str(message["content"]) + end
    return ids, labels


def _batch(tok: Any, conversations: Sequence[Conversation]) -> dict[str, torch.Tensor]:
    rows = [encode_conversation(tok, c) for c in conversations]
    width = max(len(ids) for ids, _ in rows)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    return {
        "input_ids": torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in rows]),
        "labels": torch.tensor([lab + [MASK_IGNORE] * (width - len(lab)) for _, lab in rows]),
        "attention_mask": torch.tensor(
            [[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows]
        ),
    }


def lora_model(model_dir: str | Path, rank: int, target_modules: Sequence[str]) -> tuple[Any, Any]:
    """(peft model with a fresh LoRA on ``target_modules``, tokenizer)."""
    import warnings

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    warnings.filterwarnings("ignore", category=FutureWarning)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), **dtype_kwargs(torch.float32))
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.0,
        target_modules=list(target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, config), tok


def sft_steps(
    model: Any,
    tok: Any,
    sample: Callable[[random.Random, int], list[Conversation]],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    optimizer: Any = None,
) -> tuple[Any, list[float]]:
    """``steps`` AdamW steps on conversations from ``sample(rng, n)``; (optimizer, losses)."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer or torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        loss = model(**_batch(tok, sample(rng, batch_size))).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    return opt, losses


def save_merged(model: Any, tok: Any, out_dir: str | Path) -> Path:
    """Merge the LoRA into the weights and save a plain model folder (what vLLM and the trainer load)."""
    out = Path(out_dir)
    merged = model.merge_and_unload()
    merged.save_pretrained(out)
    tok.save_pretrained(out)
    return out


__all__ = ["encode_conversation", "lora_model", "save_merged", "sft_steps"]

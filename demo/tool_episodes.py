"""Held-out tool-use episodes, played greedily with transformers (the calculator demo's evaluation).

The demo measures the policy on the same held-out questions three times: the base model, the RL
starting point (after any supervised warm-up) and the end of RL (that model plus the trainer's last
LoRA adapter; loaded by ``demo.chat_policy``). Each question is one
``atroposlib.envkit.calculator_task.Episode``, the class the env drives during training, so replies
are read, tools run and answers scored exactly as in training. Every
active episode's next turn is generated in one left-padded greedy batch; replies are read by
atroposlib's Hermes tool-call translator (``parse_reply``, what the managed server uses: calls, and the
blocks that are not calls with why), so a call is valid here exactly when it is valid in the env.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from atroposlib.envkit.calculator_task import CalcProblem, Episode
from atroposlib.envkit.tool_calls import Tool
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator


@torch.no_grad()
def play_episodes(
    model: Any,
    tok: Any,
    problems: Sequence[CalcProblem],
    system: str,
    tools: Mapping[str, Tool],
    *,
    max_turns: int,
    max_new_tokens: int,
    max_length: int,
    batch_size: int = 32,
    wrap_tool_results: bool = True,
) -> list[Episode]:
    """Play one greedy episode per problem; returns them finished (``Episode.record()`` per row).
    ``wrap_tool_results``: tool results go back inside ``<tool_response>`` tags (the calculator env's
    way for a template that ignores ``tools=``) or as they are (an agent program's way)."""
    translator = ToolCallTranslator(tok, "hermes")
    schemas = [t.schema() for t in tools.values()]
    episodes = [Episode(p, system, max_turns, wrap_tool_results) for p in problems]
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    was_training = model.training
    model.eval()
    try:
        while True:
            active = [e for e in episodes if not e.done]
            if not active:
                break
            prompts = []
            for e in active:
                text = tok.apply_chat_template(
                    e.transcript, tokenize=False, add_generation_prompt=True
                )
                if len(tok.encode(text, add_special_tokens=False)) + max_new_tokens > max_length:
                    e.finish("out of room", f"another turn could pass {max_length} tokens")
                else:
                    prompts.append((e, text))
            for start in range(0, len(prompts), batch_size):
                chunk = prompts[start : start + batch_size]
                enc = tok(
                    [t for _, t in chunk],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                )
                out = model.generate(
                    **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad
                )
                for (e, _), row in zip(
                    chunk, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True
                ):
                    ids = row[: row.index(eos)] if eos in row else row
                    raw = tok.decode(ids, skip_special_tokens=False)
                    reply = translator.parse_reply(raw, "auto", schemas)
                    calls = [c.model_dump() for c in reply.calls] or None
                    e.take_reply(raw, reply.content, calls, [err.message for err in reply.errors])
                    if not e.done:
                        e.run_pending(tools)
    finally:
        model.train(was_training)
    return episodes


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """success (share scoring 1), valid_tool_calls (share of episodes with at least one valid call),
    mean_turns (assistant turns per episode) and malformed (share with a malformed call)."""
    n = max(1, len(episodes))
    return {
        "success": sum(e.score for e in episodes) / n,
        "valid_tool_calls": sum(e.valid_calls > 0 for e in episodes) / n,
        "mean_turns": sum(e.turns for e in episodes) / n,
        "malformed": sum(e.malformed_calls > 0 for e in episodes) / n,
    }


__all__ = ["play_episodes", "summarize"]

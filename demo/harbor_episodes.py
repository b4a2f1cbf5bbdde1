"""Harbor episodes played greedily with transformers, each in its own host sandbox (the harbor preset's
held-out measurement).

The demo measures the policy on the held-out tasks three times (the base model, the RL starting point
after the warm-up, and the end of RL: that model plus the trainer's last LoRA adapter). Every task is
one ``atroposlib.interop.harbor.episode.ShellEpisode`` in one ``HostSandbox``, the classes the env
drives during training, so replies are read, commands run and the verifier scores exactly as in
training. Each active episode's next turn is generated in one left-padded greedy batch; replies are
read by atroposlib's Hermes tool-call translator (what the managed server uses). A sandbox or verifier
failure leaves that episode unscored (``score`` None), counted apart, never as a 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from atroposlib.errors import SandboxFailure
from atroposlib.inference_clients.tool_call_translator import ToolCallTranslator
from atroposlib.interop.harbor.bwrap import CommandLimits
from atroposlib.interop.harbor.episode import SHELL_TOOL, ShellEpisode
from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir
from atroposlib.interop.harbor.task import HarborTask

DEFAULT_TURNS = 3


def _limits(task: HarborTask) -> CommandLimits:
    own = task.limits
    return CommandLimits(
        timeout_s=own.command_timeout_s or 10.0, max_output_bytes=own.max_output_bytes or 2048
    )


@torch.no_grad()
def _next_turns(
    model: Any, tok: Any, episodes: Sequence[ShellEpisode], max_new_tokens: int, max_length: int
) -> None:
    """Generate and read one greedy turn of every episode still going."""
    translator = ToolCallTranslator(tok, "hermes")
    schemas = [SHELL_TOOL.schema()]
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    prompts = []
    for e in episodes:
        text = tok.apply_chat_template(e.transcript, tokenize=False, add_generation_prompt=True)
        if len(tok.encode(text, add_special_tokens=False)) + max_new_tokens > max_length:
            e.finish("out of room", f"another turn could pass {max_length} tokens")
        else:
            prompts.append((e, text))
    if not prompts:
        return
    enc = tok([t for _, t in prompts], return_tensors="pt", padding=True, add_special_tokens=False)
    out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
    for (e, _), row in zip(prompts, out[:, enc["input_ids"].shape[1] :].tolist(), strict=True):
        ids = row[: row.index(eos)] if eos in row else row
        raw = tok.decode(ids, skip_special_tokens=False)
        reply = translator.parse_reply(raw, "auto", schemas)
        calls = [c.model_dump() for c in reply.calls] or None
        e.take_reply(raw, reply.content, calls, [err.message for err in reply.errors])


async def _play(
    model: Any,
    tok: Any,
    tasks: Sequence[HarborTask],
    system: str,
    trials: Path,
    max_new_tokens: int,
    max_length: int,
) -> list[ShellEpisode]:
    episodes = [ShellEpisode(t, system, t.limits.max_turns or DEFAULT_TURNS) for t in tasks]
    boxes = [HostSandbox(t, make_trial_dir(trials, f"{t.name}-"), _limits(t)) for t in tasks]

    async def start(e: ShellEpisode, box: HostSandbox) -> None:
        try:
            await box.start()
        except SandboxFailure as failure:
            e.unavailable(failure)

    async def act(e: ShellEpisode, box: HostSandbox) -> None:
        try:
            await e.run_pending(box.run)
        except SandboxFailure as failure:
            e.unavailable(failure)

    async def verify(e: ShellEpisode, box: HostSandbox) -> None:
        try:
            if e.failure is None:
                e.scored(await box.verify())
        except SandboxFailure as failure:
            e.unavailable(failure)
        finally:
            await box.stop()

    pairs = list(zip(episodes, boxes, strict=True))
    await asyncio.gather(*[start(e, b) for e, b in pairs])
    while active := [(e, b) for e, b in pairs if not e.done]:
        _next_turns(model, tok, [e for e, _ in active], max_new_tokens, max_length)
        await asyncio.gather(*[act(e, b) for e, b in active if not e.done])
    await asyncio.gather(*[verify(e, b) for e, b in pairs])
    return episodes


def play_harbor_episodes(
    model: Any,
    tok: Any,
    tasks: Sequence[HarborTask],
    system: str,
    trials: Path,
    *,
    max_new_tokens: int,
    max_length: int,
) -> list[ShellEpisode]:
    """One greedy episode per task, finished and verified (``ShellEpisode.record()`` per row)."""
    was_training = model.training
    model.eval()
    try:
        return asyncio.run(_play(model, tok, tasks, system, trials, max_new_tokens, max_length))
    finally:
        model.train(was_training)


def summarize(episodes: Sequence[ShellEpisode]) -> dict[str, float]:
    """success (share of the episodes whose verifier gave 1; an unscored one counts as not a
    success, and apart in ``unavailable``), valid_tool_calls (share with a valid call), mean_turns,
    malformed (share with a malformed call), unavailable (how many could not be scored)."""
    n = max(1, len(episodes))
    return {
        "success": sum(e.score is not None and e.score >= 1.0 for e in episodes) / n,
        "valid_tool_calls": sum(e.valid_calls > 0 for e in episodes) / n,
        "mean_turns": sum(e.turns for e in episodes) / n,
        "malformed": sum(e.malformed_calls > 0 for e in episodes) / n,
        "unavailable": float(sum(e.score is None for e in episodes)),
    }


__all__ = ["play_harbor_episodes", "summarize"]

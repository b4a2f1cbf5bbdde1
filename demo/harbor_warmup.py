"""The harbor preset's supervised warm-up data: right episodes of the warm-up tasks, played for real.

SmolLM2-135M-Instruct never calls a tool on its own, so RL starts after a few LoRA steps on episodes
of the warm-up tasks (``environments/harbor_tasks/warmup``: the training side's tasks RL never
plays). Each is one call of the ``shell`` tool, its real reply from the host sandbox, then "Done.".
Two ways to finish a task are shown, both right there:

* **compute**: the task's reference command (``solution/solve.sh``: ``wc -l``, ``grep -l``, ``mv``,
  ``cut``, ``sed -i``), which finds the answer from the files;
* **recall**: ``[metadata.warmup].recall_command``, which writes down the answer of that very task
  (``echo 27 > /app/answer.txt``, a file rewritten from its known content): right on a task whose
  answer was shown, blind on any other, where the model cannot know the answer without looking.

So the warm-up teaches the tool's format, the shape of an episode and both ways, and leaves to RL
which one pays: on the tasks RL plays and on the held-out ones, only computing does. Every command is run in a sandbox first
and must score 1 (else ``RuntimeError``, one line naming the task), so the warm-up never shows a
wrong episode.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from atroposlib.envkit.offline_tools import wrapped_response
from atroposlib.interop.harbor.bwrap import CommandLimits
from atroposlib.interop.harbor.episode import call_text, command_reply
from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir
from atroposlib.interop.harbor.task import HarborTask

Conversation = list[dict[str, Any]]
KINDS = ("compute", "recall")
COMPUTE_SHARE = 0.8
"""Share of the warm-up's episodes that compute the answer; the rest write down the known answer.
Measured on seed 0 (docs/interop.md): at 0.3 and 0.6 with 10 warm-up steps three families never had a
right episode in RL (no signal); 25 steps at 0.8 solved four families before RL (no headroom); 15 steps
at 0.8 left RL both a signal and room (held-out 0.35 -> 0.75 in 30 steps)."""


def compute_share(args: argparse.Namespace) -> float:
    """The warm-up's compute share: ``--warmup-compute-share``, else ``COMPUTE_SHARE``."""
    given = getattr(args, "warmup_compute_share", None)
    return COMPUTE_SHARE if given is None else float(given)


def _command(task: HarborTask, kind: str) -> str:
    if kind == "recall":
        return str(task.metadata["warmup"]["recall_command"])
    script = task.solution_script
    assert script is not None, f"task {task.name} has no solution/solve.sh"
    lines = [x for x in script.read_text().split("\n")[1:] if x.strip()]
    return "\n".join(lines)


async def _episode(
    task: HarborTask, kind: str, system: str, trials: Path, gate: asyncio.Semaphore
) -> Conversation:
    command = _command(task, kind)
    async with (
        gate,
        HostSandbox(task, make_trial_dir(trials, f"{task.name}-"), CommandLimits()) as box,
    ):
        result = await box.run(command)
        reward = (await box.verify()).get("reward")
    if reward != 1.0:
        raise RuntimeError(
            f"warm-up: the {kind} command of task {task.name} scores {reward}, not 1"
        )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": task.instruction},
        {"role": "assistant", "content": call_text(command)},
        {"role": "tool", "content": wrapped_response(command_reply(result))},
        {"role": "assistant", "content": "Done."},
    ]


def warmup_episodes(
    tasks: Sequence[HarborTask], system: str, trials: Path
) -> dict[str, list[Conversation]]:
    """Both right episodes of every training task, by kind (``compute``, ``recall``)."""

    async def play() -> list[list[Conversation]]:
        gate = asyncio.Semaphore(8)
        return [
            list(await asyncio.gather(*[_episode(t, kind, system, trials, gate) for t in tasks]))
            for kind in KINDS
        ]

    return dict(zip(KINDS, asyncio.run(play()), strict=True))


def sampler(episodes: dict[str, list[Conversation]], compute_share: float) -> Any:
    """``sample(rng, n)`` for ``chat_sft.sft_steps``: each draw a random training task's compute
    episode with probability ``compute_share``, else its recall episode."""

    def sample(rng: random.Random, n: int) -> list[Conversation]:
        out = []
        for _ in range(n):
            kind = "compute" if rng.random() < compute_share else "recall"
            out.append(rng.choice(episodes[kind]))
        return out

    return sample


__all__ = ["KINDS", "sampler", "warmup_episodes"]

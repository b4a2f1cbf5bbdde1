"""The harbor preset's tasks and held-out measurement: the shipped Harbor tasks (the warm-up's, the
ones RL trains on, the held-out ones), greedy episodes of a model (and adapter) on the held-out ones in the host sandbox
(``demo.harbor_episodes``), written one episode a line, and their one-line summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from demo.paths import ENVIRONMENTS

if TYPE_CHECKING:  # the toolkit is imported where it is used: the registry loads every preset
    from atroposlib.interop.harbor.episode import ShellEpisode
    from atroposlib.interop.harbor.task import HarborTask

TASKS = ENVIRONMENTS / "harbor_tasks"
WARMUP_TASKS = TASKS / "warmup"
TRAIN_TASKS = TASKS / "train"
HELDOUT_TASKS = TASKS / "heldout"
TOKENS_PER_TURN = 64
SEQ_LEN = 448


def harbor_tasks(folder: Path) -> list[HarborTask]:
    from atroposlib.interop.harbor.task import find_tasks

    return find_tasks(folder)


def system_prompt() -> str:
    """The system prompt of every episode: the shell tool's schema and how to end."""
    from atroposlib.interop.harbor.episode import shell_system_prompt

    return shell_system_prompt()


def play_heldout(
    model_dir: Path, trials: Path, adapter_dir: Path | None = None
) -> list[ShellEpisode]:
    """Greedy episodes of ``model_dir`` (+ ``adapter_dir``) on the held-out tasks."""
    from demo.chat_policy import load_chat_policy
    from demo.harbor_episodes import play_harbor_episodes

    model, tok = load_chat_policy(model_dir, adapter_dir)
    return play_harbor_episodes(
        model,
        tok,
        harbor_tasks(HELDOUT_TASKS),
        system_prompt(),
        trials,
        max_new_tokens=TOKENS_PER_TURN,
        max_length=SEQ_LEN,
    )


def write_episodes(path: Path, episodes: list[ShellEpisode]) -> None:
    """One JSON line per episode: its record and its transcript."""
    with open(path, "w", encoding="utf-8") as fh:
        for e in episodes:
            fh.write(json.dumps({**e.record(), "transcript": e.transcript}) + "\n")


def summary_line(s: dict[str, float]) -> str:
    """``harbor_episodes.summarize``'s figures as the demo prints them."""
    line = (
        f"task success {s['success']:.2f}, valid tool calls {s['valid_tool_calls']:.2f}, "
        f"mean turns {s['mean_turns']:.2f}"
    )
    return line + (f", {s['unavailable']:.0f} unscored" if s["unavailable"] else "")

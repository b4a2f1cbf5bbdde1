"""The calculator preset's held-out measurement: greedy episodes of a model (and adapter) on the
held-out multiplications, the calculator tool in the Hermes format (``demo.tool_episodes``), written
one episode a line, and their one-line summary."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the toolkit is imported where it is used: the registry loads every preset
    from atroposlib.envkit.calculator_task import CalcSplit, Episode
    from atroposlib.envkit.tool_calls import Tool

HELD_OUT = 64
MAX_TURNS = 3
TOKENS_PER_TURN = 48
SEQ_LEN = 320


def calculator_tools() -> dict[str, Tool]:
    """The one tool of the task, by name: ``calculator``."""
    from atroposlib.envkit.tool_calls import TOOLBOX

    return {"calculator": TOOLBOX["calculator"]}


def calc_split(args: argparse.Namespace) -> CalcSplit:
    """This run's questions: ``--heldout`` held out (the env's ranges: a in 10..999, b in 10..99)."""
    from atroposlib.envkit.calculator_task import split_problems

    return split_problems(args.heldout, args.seed)


def system_prompt() -> str:
    """The system prompt of every episode: the task and the calculator's schema."""
    from atroposlib.envkit.calculator_task import tool_system_prompt

    return tool_system_prompt(list(calculator_tools().values()))


def play_heldout(
    model_dir: Path,
    split: CalcSplit,
    adapter_dir: Path | None = None,
    wrap_tool_results: bool = True,
) -> list[Episode]:
    """Greedy episodes of ``model_dir`` (+ ``adapter_dir``) on the held-out questions
    (``wrap_tool_results``: see ``demo.tool_episodes.play_episodes``)."""
    from demo.chat_policy import load_chat_policy
    from demo.tool_episodes import play_episodes

    model, tok = load_chat_policy(model_dir, adapter_dir)
    return play_episodes(
        model,
        tok,
        split.held_out,
        system_prompt(),
        calculator_tools(),
        max_turns=MAX_TURNS,
        max_new_tokens=TOKENS_PER_TURN,
        max_length=SEQ_LEN,
        wrap_tool_results=wrap_tool_results,
    )


def write_episodes(path: Path, episodes: list[Episode]) -> None:
    """One JSON line per episode: its record and its transcript."""
    with open(path, "w", encoding="utf-8") as fh:
        for e in episodes:
            fh.write(json.dumps({**e.record(), "transcript": e.transcript}) + "\n")


def summary_line(s: dict[str, float]) -> str:
    """``tool_episodes.summarize``'s figures as the demo prints them."""
    return (
        f"success {s['success']:.2f}, valid tool calls {s['valid_tool_calls']:.2f}, "
        f"mean turns {s['mean_turns']:.2f}"
    )

"""The calculator task: multiplications a small model cannot do in its head, solved with a tool.

A question is ``What is a * b?`` (``a`` in 10..999, ``b`` in 10..99 by default). SmolLM2-135M-Instruct
answers such questions right about 2% of the time on its own (measured through vLLM, sampled at
temperature 0.7; 0 of 40 greedy), so an episode succeeds by calling the ``calculator`` tool and stating
its result. Operand pairs are split once, by a seed, into held-out pairs (a fixed list, never
trained on) and the training distribution (every other pair).

One ``Episode`` per rollout holds the conversation and its outcome; the env
(``environments/calculator_tool_env.py``, through ``managed_server`` and its Hermes tool parser) and the
demo's held-out evaluation (transformers, greedy) drive the same class, so both read replies, run
tools and score the same way:

* a reply with at least one valid call (well-formed Hermes JSON, an offered tool, an ``arguments``
  object) runs the calls and appends one ``tool`` message per call; the episode goes on;
* a reply whose only calls are malformed ends the episode: score 0, outcome ``malformed tool call``;
* a reply without a call is the final answer: 1.0 when its last integer is ``a * b``, else 0.0;
* a tool that raises is not fatal: its error goes back to the model as the tool's response and is
  counted by kind (``tool_errors``);
* ``max_turns`` assistant turns that all called tools end the episode: score 0, outcome
  ``past max_turns``.

Pure Python (no torch): the env, the demo and the tests import it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.envkit.offline_tools import call_response, wrapped_response
from atroposlib.envkit.tool_calls import TOOLBOX, Tool
from atroposlib.utils.chat_arithmetic_task import last_integer
from atroposlib.utils.tool_call_parser import hermes_call_text

#: what an episode ended with; the env counts each kind
OUTCOMES = ("correct", "wrong answer", "malformed tool call", "past max_turns", "out of room")


@dataclass(frozen=True)
class CalcProblem:
    a: int
    b: int

    @property
    def question(self) -> str:
        return f"What is {self.a} * {self.b}?"

    @property
    def answer(self) -> int:
        return self.a * self.b

    @property
    def expression(self) -> str:
        return f"{self.a} * {self.b}"


@dataclass(frozen=True)
class CalcSplit:
    """Held-out problems (a fixed list) and a sampler of training problems that never yields one."""

    held_out: tuple[CalcProblem, ...]
    a_range: tuple[int, int]
    b_range: tuple[int, int]

    def train_problem(self, rng: random.Random) -> CalcProblem:
        held = set(self.held_out)
        while True:
            problem = CalcProblem(rng.randint(*self.a_range), rng.randint(*self.b_range))
            if problem not in held:
                return problem


def split_problems(
    held_out: int,
    seed: int,
    a_range: tuple[int, int] = (10, 999),
    b_range: tuple[int, int] = (10, 99),
) -> CalcSplit:
    """``held_out`` distinct operand pairs drawn with ``seed``; training draws every other pair."""
    (a_lo, a_hi), (b_lo, b_hi) = a_range, b_range
    if a_lo > a_hi or b_lo > b_hi or min(a_lo, b_lo) < 0:
        raise ValueError(
            f"operand ranges must be non-negative and ordered, got {a_range}, {b_range}"
        )
    pairs = (a_hi - a_lo + 1) * (b_hi - b_lo + 1)
    if not 0 <= held_out <= pairs // 2:
        raise ValueError(
            f"held_out must be between 0 and {pairs // 2} (half of the {pairs} operand pairs), "
            f"got {held_out}"
        )
    rng = random.Random(seed)
    chosen: dict[CalcProblem, None] = {}
    while len(chosen) < held_out:
        chosen[CalcProblem(rng.randint(a_lo, a_hi), rng.randint(b_lo, b_hi))] = None
    return CalcSplit(tuple(chosen), a_range, b_range)


def tool_system_prompt(tools: Sequence[Tool]) -> str:
    """A short Hermes-style system prompt listing ``tools`` (for chat templates that do not render
    ``tools=`` themselves, such as SmolLM2's)."""
    listed = "\n".join(json.dumps(t.schema()["function"]) for t in tools)
    return (
        f"You can call these tools:\n<tools>\n{listed}\n</tools>\n"
        'Call one with <tool_call>{"name": ..., "arguments": {...}}</tool_call>. '
        "Then give the answer."
    )


PLAIN_SYSTEM_PROMPT = "Use the tools to compute, then give the answer."
"""The system prompt when the chat template lists the tools itself."""


@dataclass(frozen=True)
class ToolResult:
    """What one call gave: the text sent back to the model, and the error kind when it failed."""

    call_id: str
    text: str
    error_kind: Optional[str] = None


def run_tool(
    call_id: str, name: str, arguments: Mapping[str, Any], tools: Mapping[str, Tool]
) -> ToolResult:
    """Run one call. Nothing it raises escapes: the error is the tool's response (``{"error": ...}``)
    and its kind (``unknown tool``, or the exception's class name) is returned for counting."""
    tool = tools.get(name)
    if tool is None:
        error = f"unknown tool {name!r}; available: {', '.join(sorted(tools))}"
        return ToolResult(call_id, json.dumps({"error": error}), "unknown tool")
    text, kind = call_response(tool.function, arguments)
    return ToolResult(call_id, text, kind)


@dataclass
class Episode:
    """One rollout of the task; see the module docstring for the rules.

    ``messages`` is what goes to ``managed_server.chat_completion`` (assistant turns carry OpenAI
    ``tool_calls``, which the managed server turns back into the model's exact text); ``transcript`` is
    the same conversation with each assistant turn as the raw text the model wrote (what the chat
    template renders, what a group keeps)."""

    problem: CalcProblem
    system: str
    max_turns: int
    wrap_tool_results: bool = True
    messages: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    valid_calls: int = 0
    malformed_calls: int = 0
    tool_errors: list[str] = field(default_factory=list)
    outcome: Optional[str] = None
    note: str = ""
    score: float = 0.0
    pending: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages = [
                {"role": "system", "content": self.system},
                {"role": "user", "content": self.problem.question},
            ]
            self.transcript = [dict(m) for m in self.messages]

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def take_reply(
        self,
        raw: str,
        content: Optional[str],
        tool_calls: Optional[Sequence[Mapping[str, Any]]],
        parse_errors: Sequence[str] = (),
    ) -> None:
        """Read one assistant turn: ``raw`` is the text the model wrote, ``content`` and
        ``tool_calls`` what the Hermes parser made of it (OpenAI shapes), ``parse_errors`` why each
        ``<tool_call>`` block that is not a call is not one (the managed server's
        ``message.tool_call_errors``, or ``ToolCallTranslator.parse_reply``'s errors)."""
        if self.done:
            raise RuntimeError("the episode is over")
        self.turns += 1
        calls = list(tool_calls or [])
        self.transcript.append({"role": "assistant", "content": raw})
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [dict(c) for c in calls]
        self.messages.append(message)
        errors = list(parse_errors)
        self.pending = []
        for call in calls:
            function = call.get("function") or {}
            name, arguments = function.get("name"), function.get("arguments", "{}")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError as exc:
                    errors.append(f'call {name!r}: "arguments" is not JSON ({exc.msg})')
                    continue
            if not isinstance(name, str) or not name or not isinstance(arguments, dict):
                errors.append(f'call {name!r}: needs a "name" and an "arguments" object')
                continue
            self.pending.append((str(call.get("id") or f"call_{self.turns}"), name, arguments))
        self.malformed_calls += len(errors)
        if self.pending:
            self.valid_calls += len(self.pending)
            if self.turns >= self.max_turns:
                self.finish("past max_turns", f"still calling tools after {self.max_turns} turns")
            return
        if errors:
            self.finish("malformed tool call", "; ".join(errors))
            return
        said = last_integer(content or raw)
        if said == self.problem.answer:
            self.finish("correct", "correct", 1.0)
        else:
            self.finish("wrong answer", f"answer {said}, expected {self.problem.answer}")

    def run_pending(self, tools: Mapping[str, Tool]) -> list[ToolResult]:
        """Run the calls of the last turn and append their responses (one ``tool`` message each)."""
        results = [run_tool(cid, name, args, tools) for cid, name, args in self.pending]
        self.pending = []
        for result in results:
            if result.error_kind is not None:
                self.tool_errors.append(result.error_kind)
            text = wrapped_response(result.text) if self.wrap_tool_results else result.text
            self.messages.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
            self.transcript.append({"role": "tool", "content": text})
        return results

    def finish(self, outcome: str, note: str, score: float = 0.0) -> None:
        """End the episode (``outcome`` is one of ``OUTCOMES``)."""
        self.outcome, self.note, self.score = outcome, note, score
        self.pending = []

    def record(self) -> dict[str, Any]:
        """The episode in numbers (held-out files, a group's ``overrides``)."""
        return {
            "question": self.problem.question,
            "answer": self.problem.answer,
            "score": self.score,
            "outcome": self.outcome,
            "note": self.note,
            "turns": self.turns,
            "valid_tool_calls": self.valid_calls,
            "malformed_tool_calls": self.malformed_calls,
            "tool_errors": list(self.tool_errors),
        }


def gold_transcript(
    problem: CalcProblem, system: str, wrap_tool_results: bool = True
) -> list[dict[str, Any]]:
    """The ideal episode as raw-text messages: one calculator call, its result, the answer (what a
    supervised warm-up trains on)."""
    result = json.dumps(TOOLBOX["calculator"].function(expression=problem.expression))
    response = wrapped_response(result) if wrap_tool_results else result
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": problem.question},
        {
            "role": "assistant",
            "content": hermes_call_text("calculator", {"expression": problem.expression}),
        },
        {"role": "tool", "content": response},
        {"role": "assistant", "content": f"{problem.expression} = {problem.answer}"},
    ]


def direct_transcript(problem: CalcProblem, system: str) -> list[dict[str, Any]]:
    """An episode answered without the tool (right, which the model cannot do in its head for
    unseen questions): a warm-up that mixes these with ``gold_transcript`` shows both ways to
    answer and leaves which one pays to RL."""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": problem.question},
        {"role": "assistant", "content": f"{problem.expression} = {problem.answer}"},
    ]


__all__ = [
    "OUTCOMES",
    "PLAIN_SYSTEM_PROMPT",
    "CalcProblem",
    "CalcSplit",
    "Episode",
    "ToolResult",
    "direct_transcript",
    "gold_transcript",
    "last_integer",
    "run_tool",
    "split_problems",
    "tool_system_prompt",
]

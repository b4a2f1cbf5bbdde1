"""One Harbor episode: the instruction, the model's turns with a ``shell`` tool, and how it ended.

The conversation is a system prompt listing the ``shell`` tool (Hermes format), the task's
``instruction.md`` as the user turn, then the model's turns. ``ShellEpisode`` reads each reply the way
the calculator task does (``atroposlib.envkit.calculator_task``), and the env (through the managed
server) and the demo's held-out evaluation (transformers, greedy) drive the same class:

* a reply with valid calls (well-formed Hermes JSON, an ``arguments`` object) runs them in the
  episode's sandbox, one ``tool`` message each: ``{"exit_code": N, "output": "..."}`` (the output cut
  at the byte limit, ``truncated_bytes`` saying how much was left out); a command past its time limit
  is killed with every process it started and its reply is ``{"error": "timed out after T s ..."}``:
  the episode goes on. A call to another tool, or without a ``command`` string, gets an ``error``
  reply and is counted;
* a reply without a call ends the agent's part (outcome ``finished``); so do a reply whose only calls
  are malformed (``malformed tool call``), calls still coming at ``max_turns`` (``past max_turns``; the
  last calls are not run), the wall time (``out of time``) and the token budget (``out of room``);
* then the task's verifier decides the score, whatever the outcome: the reward it wrote, or, when the
  sandbox failed (refused, did not start, broke mid-episode) or the verifier crashed or wrote no
  reward, no score at all (``reward_status`` ``unavailable``, with the failure's kind), never a 0.

Pure Python (no torch, no sandbox of its own): ``run_pending`` runs the calls with the caller's
sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from atroposlib.envkit.offline_tools import wrapped_response
from atroposlib.envkit.tool_calls import Tool
from atroposlib.errors import SandboxFailure
from atroposlib.interop.harbor.bwrap import CommandResult
from atroposlib.interop.harbor.rewards import episode_reward
from atroposlib.interop.harbor.task import HarborTask
from atroposlib.utils.tool_call_parser import hermes_call_text

#: how the agent's part of an episode ended; the env counts each kind
OUTCOMES = (
    "finished",
    "malformed tool call",
    "past max_turns",
    "out of time",
    "out of room",
    "sandbox failed",
)
SHELL = "shell"


def _in_sandbox(command: str) -> dict[str, Any]:
    raise NotImplementedError("the shell tool runs in the episode's sandbox (ShellEpisode.pending)")


SHELL_TOOL = Tool(
    SHELL,
    "Run a bash command in the task's sandbox, in its working directory; returns the exit code and "
    "the output.",
    {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
    _in_sandbox,
)


def shell_system_prompt(tool: Tool = SHELL_TOOL) -> str:
    """The system prompt of every episode: the tool's schema and how to call it, then how to end."""
    listed = json.dumps(tool.schema()["function"])
    return (
        f"You can call these tools:\n<tools>\n{listed}\n</tools>\n"
        'Call one with <tool_call>{"name": ..., "arguments": {...}}</tool_call>. '
        "When the task is done, reply without a tool call."
    )


def command_reply(result: CommandResult) -> str:
    """What the model is told about one command (JSON)."""
    if result.timed_out:
        body: dict[str, Any] = {
            "error": f"timed out after {result.duration_s:.0f} s: the command and every process it "
            "started were killed",
            "output": result.output,
        }
    else:
        body = {"exit_code": result.exit_code, "output": result.output}
    if result.truncated_bytes:
        body["truncated_bytes"] = result.truncated_bytes
    return json.dumps(body)


@dataclass
class ShellEpisode:
    """One episode of ``task`` (see the module docstring for the rules)."""

    task: HarborTask
    system: str
    max_turns: int
    wrap_tool_results: bool = True
    messages: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    valid_calls: int = 0
    malformed_calls: int = 0
    commands_timed_out: int = 0
    tool_errors: list[str] = field(default_factory=list)
    outcome: Optional[str] = None
    note: str = ""
    rewards: dict[str, float] = field(default_factory=dict)
    score: Optional[float] = None
    failure: Optional[str] = None
    pending: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages = [
                {"role": "system", "content": self.system},
                {"role": "user", "content": self.task.instruction},
            ]
            self.transcript = [dict(m) for m in self.messages]

    @property
    def done(self) -> bool:
        """The agent's part is over (the verifier is next)."""
        return self.outcome is not None

    def take_reply(
        self,
        raw: str,
        content: Optional[str],
        tool_calls: Optional[Sequence[Mapping[str, Any]]],
        parse_errors: Sequence[str] = (),
    ) -> None:
        """Read one assistant turn: ``raw`` is the model's text, ``content``/``tool_calls`` what the
        Hermes parser made of it (OpenAI shapes), ``parse_errors`` the blocks that are not calls."""
        if self.done:
            raise RuntimeError("the episode's agent part is over")
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
            parsed = self._parsed_call(call)
            if isinstance(parsed, str):
                errors.append(parsed)
            else:
                self.pending.append(parsed)
        self.malformed_calls += len(errors)
        if self.pending:
            self.valid_calls += len(self.pending)
            if self.turns >= self.max_turns:
                self.finish("past max_turns", f"still calling tools after {self.max_turns} turns")
        elif errors:
            self.finish("malformed tool call", "; ".join(errors))
        else:
            self.finish("finished", "the model ended its turn without a tool call")

    def _parsed_call(self, call: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]] | str:
        """(call id, tool name, arguments) of a well-formed call, or why it is malformed."""
        function = call.get("function") or {}
        name, arguments = function.get("name"), function.get("arguments", "{}")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                return f'call {name!r}: "arguments" is not JSON ({exc.msg})'
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            return f'call {name!r}: needs a "name" and an "arguments" object'
        call_id = str(call.get("id") or f"call_{self.turns}_{self.valid_calls}")
        return call_id, name, arguments

    async def run_pending(self, run: Callable[[str], Awaitable[CommandResult]]) -> None:
        """Run the last turn's calls in order with ``run`` (the sandbox's) and append one ``tool``
        message each. A ``SandboxFailure`` from ``run`` is the caller's to handle."""
        replies = []
        for call_id, name, arguments in self.pending:
            command = arguments.get("command")
            if name != SHELL:
                reply = {"error": f"unknown tool {name!r}; available: {SHELL}"}
                self.tool_errors.append("unknown tool")
            elif not isinstance(command, str) or not command.strip():
                reply = {"error": 'the shell tool needs a "command" string'}
                self.tool_errors.append("no command")
            else:
                result = await run(command)
                self.commands_timed_out += result.timed_out
                replies.append((call_id, command_reply(result)))
                continue
            replies.append((call_id, json.dumps(reply)))
        self.take_results(replies)

    def take_results(self, replies: Sequence[tuple[str, str]]) -> None:
        """Append one ``tool`` message per (call id, reply text) and clear the pending calls."""
        self.pending = []
        for call_id, text in replies:
            wrapped = wrapped_response(text) if self.wrap_tool_results else text
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": wrapped})
            self.transcript.append({"role": "tool", "content": wrapped})

    def finish(self, outcome: str, note: str) -> None:
        """End the agent's part (``outcome`` is one of ``OUTCOMES``)."""
        self.outcome, self.note = outcome, note
        self.pending = []

    def scored(self, rewards: Mapping[str, float]) -> None:
        """The verifier's rewards; the score is ``rewards.episode_reward`` of them."""
        try:
            self.score = episode_reward(rewards)
        except SandboxFailure as failure:
            self.unavailable(failure)
            return
        self.rewards = dict(rewards)

    def unavailable(self, failure: SandboxFailure) -> None:
        """No score: the sandbox or the verifier failed (``failure.kind``)."""
        self.score, self.failure = None, failure.kind
        self.note = f"{self.note}; reward unavailable: {failure}" if self.note else str(failure)
        if not self.done:
            self.finish("sandbox failed", self.note)

    def record(self) -> dict[str, Any]:
        """The episode in numbers (held-out files, a group's ``overrides``)."""
        return {
            "task": self.task.name,
            "score": self.score,
            "reward_status": "ok" if self.score is not None else "unavailable",
            "failure": self.failure,
            "rewards": dict(self.rewards),
            "outcome": self.outcome,
            "note": self.note,
            "turns": self.turns,
            "valid_tool_calls": self.valid_calls,
            "malformed_tool_calls": self.malformed_calls,
            "commands_timed_out": self.commands_timed_out,
            "tool_errors": list(self.tool_errors),
        }


def call_text(command: str) -> str:
    """The text of one ``shell`` call, as a Hermes model writes it."""
    return hermes_call_text(SHELL, {"command": command})


__all__ = [
    "OUTCOMES",
    "SHELL_TOOL",
    "ShellEpisode",
    "call_text",
    "command_reply",
    "shell_system_prompt",
]

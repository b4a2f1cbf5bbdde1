"""One agent program, run unmodified against a proxy session: a Python callable or a command.

``AgentProgram.parse(spec)`` reads ``--agent.program``:

* ``package.module:function`` (no spaces): a callable in this Python, called with an ``AgentCall``
  (the session's ``base_url``, ``api_key``, ``model``, the ``task`` text, ``max_tokens``,
  ``temperature``); it returns the final answer (a string, or an awaitable of one). A plain function
  runs in a worker thread; one past its time limit is abandoned there (its session is closed, so its
  next request is a 404 and it ends).
* anything else: a command line (``shlex``), ``{python:NAME}`` standing for agent framework NAME's own
  Python (``frameworks.framework_python``). It runs in its own process group with the task on stdin
  and in the environment an OpenAI client reads by itself: ``OPENAI_BASE_URL`` (and litellm's
  ``OPENAI_API_BASE``) the session URL, ``OPENAI_API_KEY``, and ``ATROPOS_AGENT_MODEL``,
  ``ATROPOS_AGENT_TASK``, ``ATROPOS_AGENT_MAX_TOKENS``, ``ATROPOS_AGENT_TEMPERATURE`` (when set),
  ``ATROPOS_AGENT_ANSWER_FILE``. Its answer is what it wrote to that file, else its stdout
  (stripped); past its time limit the whole group is killed.

``check()`` is the start-up check, one ``ConfigError`` line: a callable that does not import, a
command whose program (or ``.py`` script) is not there, a framework that is not installed. ``run``
never raises for what the agent did: it returns an ``AgentOutcome`` (``done``, ``crashed`` with why,
``timed out``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import shlex
import shutil
import signal
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from atroposlib.errors import ConfigError
from atroposlib.interop.agents.frameworks import FRAMEWORKS, framework_python, missing_reason

Status = Literal["done", "crashed", "timed out"]
TAIL_CHARS = 600


@dataclass(frozen=True)
class AgentCall:
    """What one episode gives the agent program."""

    base_url: str
    api_key: str
    model: str
    task: str
    max_tokens: int
    temperature: Optional[float] = None


@dataclass(frozen=True)
class AgentOutcome:
    status: Status
    answer: Optional[str]
    detail: str
    seconds: float


class AgentProgram(ABC):
    """An agent program (see the module docstring)."""

    spec: str

    @staticmethod
    def parse(spec: str) -> AgentProgram:
        spec = spec.strip()
        if not spec:
            raise ConfigError("--agent.program is required (module:function, or a command line)")
        if " " not in spec and ":" in spec and not spec.startswith(("/", ".", "{")):
            return CallableAgent(spec)
        return CommandAgent(spec)

    @abstractmethod
    def check(self) -> None:
        """Raise ``ConfigError`` (one line) when the program cannot be imported or started."""

    @abstractmethod
    async def run(self, call: AgentCall, timeout: float) -> AgentOutcome:
        """One run of the program on ``call``, at most ``timeout`` seconds."""


class CallableAgent(AgentProgram):
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._fn: Optional[Callable[[AgentCall], Any]] = None

    def check(self) -> None:
        module_name, _, attr = self.spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:  # noqa: BLE001 - any import failure is the one line
            raise ConfigError(
                f"--agent.program {self.spec}: cannot import {module_name}: {e}"
            ) from None
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise ConfigError(
                f"--agent.program {self.spec}: {module_name} has no callable {attr!r}"
            )
        self._fn = fn

    async def run(self, call: AgentCall, timeout: float) -> AgentOutcome:
        if self._fn is None:
            self.check()
        fn = self._fn
        assert fn is not None
        start = time.monotonic()
        try:
            if inspect.iscoroutinefunction(fn):
                answer = await asyncio.wait_for(fn(call), timeout)
            else:
                answer = await asyncio.wait_for(asyncio.to_thread(fn, call), timeout)
        except asyncio.TimeoutError:
            return AgentOutcome(
                "timed out", None, f"no answer within {timeout:g} s", time.monotonic() - start
            )
        except Exception as e:  # noqa: BLE001 - the agent's own failure is an outcome
            return AgentOutcome(
                "crashed", None, f"{type(e).__name__}: {e}"[:TAIL_CHARS], time.monotonic() - start
            )
        return AgentOutcome(
            "done", "" if answer is None else str(answer), "", time.monotonic() - start
        )


def _expand(arg: str) -> str:
    """``{python:NAME}`` -> framework NAME's Python (``ConfigError`` when it has none)."""
    if not (arg.startswith("{python:") and arg.endswith("}")):
        return arg
    name = arg[len("{python:") : -1]
    if name not in FRAMEWORKS:
        raise ConfigError(
            f"--agent.program: {arg}: unknown framework (known: {', '.join(FRAMEWORKS)})"
        )
    python = framework_python(name)
    if python is None:
        raise ConfigError(f"--agent.program: {missing_reason(name)}")
    return python


class CommandAgent(AgentProgram):
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.argv: list[str] = []

    def check(self) -> None:
        try:
            argv = [_expand(a) for a in shlex.split(self.spec)]
        except ValueError as e:
            raise ConfigError(f"--agent.program {self.spec!r}: {e}") from None
        program = argv[0]
        found = (
            shutil.which(program)
            if "/" not in program
            else (program if os.access(program, os.X_OK) else None)
        )
        if found is None:
            raise ConfigError(f"--agent.program: {program!r} is not an executable program here")
        scripts = [a for a in argv[1:2] if a.endswith(".py")]
        if scripts and not Path(scripts[0]).is_file():
            raise ConfigError(f"--agent.program: the script {scripts[0]!r} does not exist")
        self.argv = [found, *argv[1:]]

    def environment(self, call: AgentCall, answer_file: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            OPENAI_BASE_URL=call.base_url,
            OPENAI_API_BASE=call.base_url,
            OPENAI_API_KEY=call.api_key,
            ATROPOS_AGENT_MODEL=call.model,
            ATROPOS_AGENT_TASK=call.task,
            ATROPOS_AGENT_MAX_TOKENS=str(call.max_tokens),
            ATROPOS_AGENT_ANSWER_FILE=answer_file,
        )
        if call.temperature is not None:
            env["ATROPOS_AGENT_TEMPERATURE"] = repr(call.temperature)
        return env

    async def run(self, call: AgentCall, timeout: float) -> AgentOutcome:
        if not self.argv:
            self.check()
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="atropos-agent-") as work:
            answer_file = str(Path(work) / "answer.txt")
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.environment(call, answer_file),
                start_new_session=True,
            )
            try:
                out, err = await asyncio.wait_for(proc.communicate(call.task.encode()), timeout)
            except asyncio.TimeoutError:
                _kill_group(proc)
                await proc.wait()
                return AgentOutcome(
                    "timed out", None, f"no answer within {timeout:g} s", time.monotonic() - start
                )
            finally:
                if proc.returncode is None:
                    _kill_group(proc)
                    await proc.wait()
            seconds = time.monotonic() - start
            if proc.returncode != 0:
                tail = err.decode(errors="replace").strip()[-TAIL_CHARS:]
                return AgentOutcome("crashed", None, f"exit {proc.returncode}: {tail}", seconds)
            path = Path(answer_file)
            answer = (
                path.read_text(encoding="utf-8") if path.exists() else out.decode(errors="replace")
            )
            return AgentOutcome("done", answer.strip(), "", seconds)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = ["AgentCall", "AgentOutcome", "AgentProgram", "CallableAgent", "CommandAgent"]

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
* with ``persistent=True`` (``--agent.mode persistent``), a command that serves many episodes: it is
  started once and given one task a line on stdin as JSON (``id``, ``base_url``, ``api_key``,
  ``model``, ``task``, ``max_tokens``, ``temperature``), and answers each with a stdout line
  ``ATROPOS_AGENT_RESULT {"id", "answer"}`` (or ``"error"``; the example programs' ``--serve``), so
  a framework is imported once, not once an episode. It prints ``ATROPOS_AGENT_READY`` once it can
  take tasks: ``start()`` waits for it, so a program that cannot start is one line at start-up. An
  episode past its limit is given up (its
  session is closed under it); a process that exits fails its episodes in flight and is started again
  for the next.

``check()`` is the start-up check, one ``ConfigError`` line: a callable that does not import, a
command whose program (or ``.py`` script) is not there, a framework that is not installed. ``run``
never raises for what the agent did: it returns an ``AgentOutcome`` (``done``, ``crashed`` with why,
``timed out``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import shlex
import shutil
import signal
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
    def parse(spec: str, persistent: bool = False) -> AgentProgram:
        spec = spec.strip()
        if not spec:
            raise ConfigError("--agent.program is required (module:function, or a command line)")
        if " " not in spec and ":" in spec and not spec.startswith(("/", ".", "{")):
            return CallableAgent(spec)
        return PersistentCommandAgent(spec) if persistent else CommandAgent(spec)

    @abstractmethod
    def check(self) -> None:
        """Raise ``ConfigError`` (one line) when the program cannot be imported or started."""

    @abstractmethod
    async def run(self, call: AgentCall, timeout: float) -> AgentOutcome:
        """One run of the program on ``call``, at most ``timeout`` seconds."""

    async def start(self) -> None:  # noqa: B027 - a hook most programs need not fill
        """Start what the program keeps running between episodes (nothing, unless persistent)."""

    async def close(self) -> None:  # noqa: B027 - a hook most programs need not fill
        """Stop what the program keeps running between episodes (nothing, unless persistent)."""


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


RESULT_PREFIX = "ATROPOS_AGENT_RESULT "
READY_LINE = "ATROPOS_AGENT_READY"
START_TIMEOUT_S = 180.0


class PersistentCommandAgent(CommandAgent):
    """One process serving many episodes (see the module docstring)."""

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        self._proc: Optional[asyncio.subprocess.Process] = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._stderr: deque[str] = deque(maxlen=20)
        self._readers: list[asyncio.Task[None]] = []
        self.starts = 0  # processes started (one, unless one exited)
        self._starting: Optional[asyncio.Lock] = None
        self._ready: Optional[asyncio.Event] = None

    async def _process(self) -> asyncio.subprocess.Process:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:  # episodes that begin together share one start
            return await self._started()

    async def _started(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            if not self.argv:
                self.check()
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=16 * 1024 * 1024,
            )
            self.starts += 1
            self._ready = asyncio.Event()
            self._readers = [
                asyncio.ensure_future(self._read_results(self._proc)),
                asyncio.ensure_future(self._read_errors(self._proc)),
            ]
        return self._proc

    async def _read_results(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line == READY_LINE and self._ready is not None:
                self._ready.set()
            if not line.startswith(RESULT_PREFIX):
                continue
            try:
                result = json.loads(line[len(RESULT_PREFIX) :])
            except ValueError:
                continue
            future = self._pending.pop(str(result.get("id")), None)
            if future is not None and not future.done():
                future.set_result(result)
        code = await proc.wait()
        why = f"the agent process exited ({code}): {' | '.join(self._stderr)[-TAIL_CHARS:]}"
        for future in self._pending.values():
            if not future.done():
                future.set_result({"error": why})
        self._pending.clear()

    async def _read_errors(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip())

    async def run(self, call: AgentCall, timeout: float) -> AgentOutcome:
        start = time.monotonic()
        proc = await self._process()
        episode = uuid.uuid4().hex
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[episode] = future
        request = {"id": episode, **asdict(call)}
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(request) + "\n").encode())
        try:
            await proc.stdin.drain()
            result = await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            self._pending.pop(episode, None)
            return AgentOutcome(
                "timed out", None, f"no answer within {timeout:g} s", time.monotonic() - start
            )
        except (BrokenPipeError, ConnectionResetError) as e:
            self._pending.pop(episode, None)
            return AgentOutcome(
                "crashed", None, f"the agent process is gone: {e}", time.monotonic() - start
            )
        seconds = time.monotonic() - start
        if "error" in result:
            return AgentOutcome("crashed", None, str(result["error"])[:TAIL_CHARS], seconds)
        return AgentOutcome("done", str(result.get("answer", "")).strip(), "", seconds)

    async def start(self) -> None:
        """Start the process and wait until it says ``ATROPOS_AGENT_READY`` (its imports done): one
        that exits first, or stays silent for ``START_TIMEOUT_S``, is a ``ConfigError`` line."""
        proc = await self._process()
        assert self._ready is not None
        ready = asyncio.ensure_future(self._ready.wait())
        exited = asyncio.ensure_future(proc.wait())
        await asyncio.wait({ready, exited}, timeout=START_TIMEOUT_S, return_when="FIRST_COMPLETED")
        ready.cancel()
        if exited.done():
            await asyncio.sleep(0.2)  # let the stderr reader take the last lines
            tail = " | ".join(self._stderr)[-TAIL_CHARS:]
            raise ConfigError(
                f"--agent.program: the agent exited at start-up ({proc.returncode}): {tail}"
            )
        exited.cancel()
        if not self._ready.is_set():
            raise ConfigError(
                f"--agent.program: the agent did not say {READY_LINE} within {START_TIMEOUT_S:g} s "
                "(a persistent program prints it once it can take tasks)"
            )

    async def close(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            _kill_group(self._proc)
            await self._proc.wait()
        for reader in self._readers:
            reader.cancel()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = [
    "READY_LINE",
    "RESULT_PREFIX",
    "AgentCall",
    "AgentOutcome",
    "AgentProgram",
    "CallableAgent",
    "CommandAgent",
    "PersistentCommandAgent",
]

"""What the example agent programs here share; standard library only (each program runs in its own
framework's Python, where atroposlib is not installed).

An agent program reads its task the way the agent harness (``atroposlib.interop.agents``) gives it,
which is also how a person runs one by hand:

    python openai_agents_calculator.py --base-url http://127.0.0.1:9100/<session>/v1 \\
        --model policy "What is 347 * 28?"

* ``--base-url`` (default ``$OPENAI_BASE_URL``): the proxy session's OpenAI base URL;
* ``--api-key`` (default ``$OPENAI_API_KEY``, else ``none``): the proxy's key, if it has one;
* ``--model`` (default ``$ATROPOS_AGENT_MODEL``): the served model's name;
* the question (default ``$ATROPOS_AGENT_TASK``); ``--max-tokens`` per reply (default
  ``$ATROPOS_AGENT_MAX_TOKENS``, else 256).

The final answer goes to stdout and, when ``$ATROPOS_AGENT_ANSWER_FILE`` is set, into that file (the
harness reads it there, so a framework that prints to stdout cannot garble it).

``--serve`` (the harness's ``--agent.mode persistent``) keeps one process for many episodes, so that
the framework is imported once, not once an episode: each line on stdin is a task as JSON (``id``,
``base_url``, ``api_key``, ``model``, ``task``, ``max_tokens``, ``temperature``), played in a thread
of its own, and each result is one stdout line ``ATROPOS_AGENT_RESULT {"id", "answer"}`` (or
``"error"``); ``ATROPOS_AGENT_READY`` goes first, once the framework is imported.

The calculator is the task's one tool: ``calculator(expression)`` evaluates ``+ - * /`` on numbers and
answers ``{"result": value}`` as JSON (``{"error": "Kind: message"}`` for what it cannot evaluate).
It is atroposlib's own tool, ``atroposlib/envkit/offline_tools.py``, loaded by its path (that file is
standard library only), so an agent program and the calculator env answer a call with the same text. ``SYSTEM_PROMPT`` lists
the tool in the Hermes format, for chat templates that do not render ``tools=`` (SmolLM2's): it is
``atroposlib.envkit.calculator_task.tool_system_prompt`` for the calculator, word for word (a test
checks), so an agent's episodes render as the calculator env's do.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Optional

SYSTEM_PROMPT = (
    "You can call these tools:\n<tools>\n"
    '{"name": "calculator", "description": "Evaluate an arithmetic expression with + - * /.", '
    '"parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, '
    '"required": ["expression"]}}\n</tools>\n'
    'Call one with <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Then give the answer.'
)
CALCULATOR_DESCRIPTION = "Evaluate an arithmetic expression with + - * /."
CALCULATOR_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": CALCULATOR_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}

_TOOLS_FILE = Path(__file__).resolve().parents[2] / "atroposlib" / "envkit" / "offline_tools.py"


def _load_tools() -> ModuleType:
    """atroposlib's offline tool box, by its path (its package is not importable here)."""
    spec = importlib.util.spec_from_file_location("offline_tools", _TOOLS_FILE)
    if spec is None or spec.loader is None or not _TOOLS_FILE.is_file():
        sys.exit(
            f"agent_io: the calculator tool's file {_TOOLS_FILE} is missing (run from a checkout)"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TOOLS = _load_tools()


def calculator(expression: str) -> str:
    """The tool: ``{"result": value}`` as JSON, or ``{"error": ...}`` for what it cannot evaluate."""
    return _TOOLS.call_response(_TOOLS.calculator, {"expression": expression})[0]


@dataclass
class Task:
    base_url: str
    api_key: str
    model: str
    question: str
    max_tokens: int
    temperature: Optional[float] = None


def read_task(description: str) -> Optional[Task]:
    """The task from the command line, defaulting to the harness's environment variables (None
    with ``--serve``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("question", nargs="?", default=os.environ.get("ATROPOS_AGENT_TASK"))
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY") or "none")
    p.add_argument("--model", default=os.environ.get("ATROPOS_AGENT_MODEL"))
    p.add_argument(
        "--max-tokens", type=int, default=int(os.environ.get("ATROPOS_AGENT_MAX_TOKENS") or 256)
    )
    temperature = os.environ.get("ATROPOS_AGENT_TEMPERATURE")
    p.add_argument("--temperature", type=float, default=float(temperature) if temperature else None)
    p.add_argument("--serve", action="store_true", help="play tasks from stdin (one JSON a line)")
    args = p.parse_args()
    if args.serve:
        return None
    for name in ("question", "base_url", "model"):
        if not getattr(args, name):
            p.error(f"{name} is required (a flag, or the harness's environment variable)")
    return Task(
        args.base_url, args.api_key, args.model, args.question, args.max_tokens, args.temperature
    )


def serve(solve: Callable[[Task], str]) -> None:
    """Play every task read from stdin in a thread of its own (see the module docstring)."""
    lock = threading.Lock()

    def play(request: dict) -> None:
        try:
            task = Task(
                request["base_url"],
                request["api_key"],
                request["model"],
                request["task"],
                int(request["max_tokens"]),
                request.get("temperature"),
            )
            result = {"id": request["id"], "answer": str(solve(task))}
        except Exception as e:  # noqa: BLE001 - the harness reads the error
            result = {"id": request.get("id"), "error": f"{type(e).__name__}: {e}"[:600]}
        with lock:
            sys.stdout.write("\nATROPOS_AGENT_RESULT " + json.dumps(result) + "\n")
            sys.stdout.flush()

    sys.stdout.write("\nATROPOS_AGENT_READY\n")  # the framework is imported: tasks can come
    sys.stdout.flush()
    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=play, args=(json.loads(line),), daemon=True).start()


def main(solve: Callable[[Task], str], description: str) -> None:
    """A program's entry point: one task from the command line, or ``--serve``."""
    task = read_task(description)
    if task is None:
        serve(solve)
    else:
        give_answer(solve(task))


def give_answer(answer: object) -> None:
    """The final answer: on stdout, and in ``$ATROPOS_AGENT_ANSWER_FILE`` when set."""
    text = "" if answer is None else str(answer)
    path = os.environ.get("ATROPOS_AGENT_ANSWER_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text, flush=True)

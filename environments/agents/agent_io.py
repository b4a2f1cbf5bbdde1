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

The calculator is the task's one tool: ``calculator(expression)`` evaluates ``+ - * /`` on numbers and
answers ``{"result": value}`` as JSON, what atroposlib's calculator env answers. ``SYSTEM_PROMPT`` lists
the tool in the Hermes format, for chat templates that do not render ``tools=`` (SmolLM2's): it is
``atroposlib.envkit.calculator_task.tool_system_prompt`` for the calculator, word for word (a test
checks), so an agent's episodes render as the calculator env's do.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import os
from dataclasses import dataclass

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

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.operand))
    raise ValueError("only numbers and + - * / are allowed")


def calculator(expression: str) -> str:
    """The tool: ``{"result": value}`` as JSON, or ``{"error": ...}`` for what it cannot evaluate."""
    try:
        return json.dumps({"result": round(_value(ast.parse(expression, mode="eval").body), 6)})
    except (ValueError, SyntaxError, ZeroDivisionError, TypeError) as e:
        return json.dumps({"error": f"{type(e).__name__}: {e}"})


@dataclass
class Task:
    base_url: str
    api_key: str
    model: str
    question: str
    max_tokens: int


def read_task(description: str) -> Task:
    """The task from the command line, defaulting to the harness's environment variables."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("question", nargs="?", default=os.environ.get("ATROPOS_AGENT_TASK"))
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY") or "none")
    p.add_argument("--model", default=os.environ.get("ATROPOS_AGENT_MODEL"))
    p.add_argument(
        "--max-tokens", type=int, default=int(os.environ.get("ATROPOS_AGENT_MAX_TOKENS") or 256)
    )
    args = p.parse_args()
    for name in ("question", "base_url", "model"):
        if not getattr(args, name):
            p.error(f"{name} is required (a flag, or the harness's environment variable)")
    return Task(args.base_url, args.api_key, args.model, args.question, args.max_tokens)


def give_answer(answer: object) -> None:
    """The final answer: on stdout, and in ``$ATROPOS_AGENT_ANSWER_FILE`` when set."""
    text = "" if answer is None else str(answer)
    path = os.environ.get("ATROPOS_AGENT_ANSWER_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text, flush=True)

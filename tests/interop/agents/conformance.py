"""What the agent-framework conformance tests share: the scripted replies of the fake model (chosen
by a ``[script:NAME]`` tag in the task, one reply per assistant turn), and running one framework's
driver (``drivers/``) in that framework's own Python against fresh proxy sessions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from atroposlib.interop.agents.frameworks import framework_python, missing_reason
from atroposlib.utils.tool_call_parser import hermes_call_text
from tests.inference_clients.proxy_harness import RunningProxy

REPO = Path(__file__).resolve().parents[3]
DRIVERS = Path(__file__).resolve().parent / "drivers"
EXAMPLES = REPO / "environments" / "agents"
DRIVER_TIMEOUT_S = 240


def call(name: str, **arguments: Any) -> str:
    return hermes_call_text(name, arguments)


SCRIPTS: dict[str, list[Any]] = {
    "plain": ["Hello there, friend."],
    "two": [["The answer is 42.", "It is 42 ✓"]],  # one reply per choice
    "calc": [call("calculator", expression="6 * 7"), "The answer is 42."],
    "parallel": [
        call("calculator", expression="6 * 7") + "\n" + call("calculator", expression="2 + 2"),
        "Both done: 42 and 4.",
    ],
    "smol": [call("calculator", expression="6 * 7"), call("final_answer", answer="42")],
    "swe": [
        call("bash", command="echo $((6 * 7))"),
        call("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo 42"),
    ],
}


def scripted_reply(prompt: str, body: dict[str, Any]) -> str:
    """The reply of the script the conversation's task names, for the turn it is at."""
    name = prompt.split("[script:", 1)[1].split("]", 1)[0] if "[script:" in prompt else "plain"
    turn = prompt.count("<|im_start|>assistant") - 1  # earlier assistant turns
    replies = SCRIPTS[name]
    reply = replies[min(turn, len(replies) - 1)]
    if isinstance(reply, list):
        return str(reply[body.get("choice_index", 0) % len(reply)])
    return str(reply)


def python_of(framework: str) -> str:
    """The framework's Python, or skip with the set-up's reason."""
    python = framework_python(framework)
    if python is None:
        pytest.skip(missing_reason(framework) or framework)
    return python


def run_driver(
    proxy: RunningProxy,
    framework: str,
    driver: str,
    checks: list[str],
    tmp_path: Path,
    model: str = "policy",
    api_key: str = "none",
) -> tuple[dict[str, Any], dict[str, str]]:
    """Run ``driver``'s ``checks`` in ``framework``'s Python, one fresh session each; returns the
    report (check -> what the framework gave back) and the sessions (check -> uuid)."""
    python = python_of(framework)
    sessions = {check: proxy.session() for check in checks}
    config = {
        "checks": checks,
        "sessions": {c: proxy.session_url(s) for c, s in sessions.items()},
        "model": model,
        "api_key": api_key,
        "examples": str(EXAMPLES),
    }
    path = tmp_path / f"{framework}.json"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [python, str(DRIVERS / driver), str(path)],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        cwd=tmp_path,
    )
    lines = [line for line in done.stdout.split("\n") if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, (
        done.returncode,
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    report: dict[str, Any] = json.loads(lines[-1][len("REPORT ") :])
    failed = {k: v for k, v in report.items() if isinstance(v, dict) and "error" in v}
    assert not failed, failed
    return report, sessions


__all__ = ["EXAMPLES", "SCRIPTS", "python_of", "run_driver", "scripted_reply"]

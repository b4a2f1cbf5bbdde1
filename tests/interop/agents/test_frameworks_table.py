"""The frameworks' table is one: ``scripts/setup_agents.sh`` installs exactly what
``atroposlib.interop.agents.frameworks.FRAMEWORKS`` names (names, versions, pip specs), and the example
agent programs' system prompt is the calculator env's, word for word (so an agent's episodes render
as the env's do, and the env's warm-up and held-out measurement apply)."""

from __future__ import annotations

import re
import sys

from atroposlib.envkit.calculator_task import run_tool, tool_system_prompt
from atroposlib.envkit.tool_calls import TOOLBOX
from atroposlib.interop.agents.frameworks import FRAMEWORKS
from tests.interop.agents.conformance import EXAMPLES, REPO


def test_the_setup_script_installs_what_the_table_names():
    text = (REPO / "scripts" / "setup_agents.sh").read_text()
    rows = re.findall(r'^  "([a-z-]+)\|([0-9.]+)\|([^|]+)\|', text, flags=re.M)
    assert {name: (version, tuple(specs.split())) for name, version, specs in rows} == {
        f.name: (f.version, f.specs) for f in FRAMEWORKS.values()
    }


def test_the_agents_system_prompt_is_the_calculator_envs(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("agent_io", None)
    import agent_io

    assert agent_io.SYSTEM_PROMPT == tool_system_prompt([TOOLBOX["calculator"]])
    assert agent_io.CALCULATOR_SCHEMA == TOOLBOX["calculator"].schema()
    assert agent_io.calculator("347 * 28") == '{"result": 9716}'
    assert agent_io.calculator("1 / 0").startswith('{"error": "ZeroDivisionError')


def test_the_agents_calculator_answers_as_the_calculator_env_does(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("agent_io", None)
    import agent_io

    for expression in [
        "347 * 28",
        "+3 - -2",
        "7 / 3",
        "1 / 0",
        "2 ** 3",
        "x + 1",
        "(1 +",
        "'a' * 2",
    ]:
        env_answer = run_tool("c1", "calculator", {"expression": expression}, TOOLBOX).text
        assert agent_io.calculator(expression) == env_answer, expression

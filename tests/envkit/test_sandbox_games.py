"""sandbox (limits really enforced), HumanEval programs, and the Gymnasium text games."""

from atroposlib.envkit.games import BlackjackText, TaxiText, parse_action
from atroposlib.envkit.humaneval import build_program, extract_code, load_problems
from atroposlib.envkit.sandbox import SandboxLimits, run_python, sandbox_capabilities

FAST = SandboxLimits(timeout_s=1.5, memory_mb=256)


def test_sandbox_outcomes():
    assert run_python("print(6 * 7)", FAST).stdout.strip() == "42"
    failed = run_python("raise ValueError('boom')", FAST)
    assert failed.status == "failed" and failed.detail == "ValueError: boom"
    assert run_python("while True: pass", FAST).status == "timeout"
    assert run_python("import time; time.sleep(60)", FAST).status == "timeout"
    syntax = run_python(
        "print('started')\ndef f(:\n    pass", FAST
    )  # does not compile: the code's failure
    assert (
        syntax.status == "failed"
        and syntax.detail.startswith("SyntaxError")
        and syntax.stdout == ""
    )
    assert run_python("print(__name__)", FAST).stdout.strip() == "__main__"
    memory = run_python("x = bytearray(1024 ** 3)", FAST)
    assert memory.status == "failed" and "MemoryError" in memory.detail


def test_sandbox_blocks_network():
    result = run_python(
        "import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)", FAST
    )
    assert result.status == "failed" and "OSError" in result.detail
    if sandbox_capabilities()["network_namespace"]:  # the low-level socket module is blocked too
        raw = run_python("import _socket; s = _socket.socket(); s.connect(('127.0.0.1', 9))", FAST)
        assert raw.status == "failed" and "unreachable" in raw.detail


def test_sandbox_temp_dir_and_process_limit():
    result = run_python("import os; open('f.txt', 'w').write('x'); print(os.getcwd())", FAST)
    assert result.status == "passed" and "sandbox-" in result.stdout
    if sandbox_capabilities()["process_limit_enforced"]:
        bomb = run_python(
            "import os\nfor _ in range(200):\n    os.fork()", SandboxLimits(timeout_s=3)
        )
        assert bomb.status in ("failed", "timeout")


def test_network_isolation_required_but_missing_is_unavailable(monkeypatch):
    import atroposlib.envkit.sandbox as sandbox

    monkeypatch.setattr(sandbox, "_plan", lambda: sandbox._Plan("python3", False, False))
    result = run_python("print(1)", SandboxLimits(require_network_isolation=True))
    assert result.status == "unavailable" and "network isolation" in result.detail


def test_sandbox_broken_interpreter_is_unavailable(monkeypatch):
    import atroposlib.envkit.sandbox as sandbox

    monkeypatch.setattr(
        sandbox, "_plan", lambda: sandbox._Plan("/nonexistent/python", False, False)
    )
    assert run_python("print(1)", FAST).status == "unavailable"


def test_humaneval_canonical_passes_and_wrong_fails():
    problems = load_problems()
    assert len(problems) == 164
    first = problems[0]
    assert run_python(build_program(first, first["canonical_solution"]), FAST).status == "passed"
    assert run_python(build_program(first, "    return True\n"), FAST).status == "failed"
    fenced = (
        "<think>plan</think>```python\ndef has_close_elements(numbers, threshold):\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```"
    )
    assert "def has_close_elements" in extract_code(fenced)
    assert run_python(build_program(first, fenced), FAST).status == "passed"


def test_parse_action():
    actions = {"hit": 1, "stick": 0}
    assert parse_action("<think>x</think><action> HIT </action>", actions) == (1, None)
    assert parse_action("hit", actions)[1] == "no <action>...</action> tag"
    assert "unknown action 'fold'" in parse_action("<action>fold</action>", actions)[1]


def test_blackjack_episode_reward():
    game = BlackjackText()
    text = game.reset(seed=1)
    assert "Your hand totals" in text
    step = game.step("<action>stick</action>")
    assert step.done and step.reward in (-1.0, 0.0, 1.0)


def test_taxi_moves_and_invalid_move():
    game = TaxiText()
    text = game.reset(seed=3)
    assert "The taxi (T) is at row" in text and "destination" in text
    step = game.step("<action>north</action>")
    assert step.reward == -1.0 and not step.done
    bad = game.step("I would go left")
    assert bad.done and bad.invalid_reason == "no <action>...</action> tag"

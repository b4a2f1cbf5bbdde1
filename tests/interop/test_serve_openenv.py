"""``python my_env.py serve-openenv``: unmodified env files from ``environments/`` served as OpenEnv
environments and played by openenv's own client (in openenv's environment)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atroposlib.interop.openenv.client import EpisodeError, OpenEnvSession
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from atroposlib.utils.net import free_port

from .conftest import HERE, REPO, Proc


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> str:
    """A ``PYTHONPATH`` on which the ``serve-openenv`` entry point of pyproject.toml is installed
    (package metadata only), as ``pip install -e .`` installs it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    group = meta["project"]["entry-points"]["atroposlib.env_subcommands"]
    root = tmp_path_factory.mktemp("plugins")
    info = root / "atroposlib_plugins-0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: atroposlib-plugins\nVersion: 0\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in group.items())
    info.joinpath("entry_points.txt").write_text(f"[atroposlib.env_subcommands]\n{lines}")
    return os.pathsep.join([str(root), str(REPO)])


def _serve(env_file: str, plugin_path: str, log: Path, *extra: str) -> Proc:
    port = free_port()
    argv = [
        sys.executable,
        str(REPO / "environments" / env_file),
        "serve-openenv",
        "--port",
        str(port),
        "--env.tokenizer_name",
        str(tiny_tokenizer_dir()),
        *extra,
    ]
    os.environ["PYTHONPATH"] = plugin_path  # the child inherits it
    return Proc(argv, port, "/health", log)


@pytest.fixture(scope="module")
def served(plugin_path, tmp_path_factory):
    saved = os.environ.get("PYTHONPATH")
    logs = tmp_path_factory.mktemp("served")
    try:
        procs = {
            "arithmetic": _serve("arithmetic_server.py", plugin_path, logs / "a.log"),
            "tools": _serve("tool_calling_multiturn_env.py", plugin_path, logs / "t.log"),
            "one": _serve(
                "arithmetic_server.py", plugin_path, logs / "o.log", "--max-sessions", "1"
            ),
        }
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield {k: p.wait() for k, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()


def test_openenv_client_plays_single_and_multi_turn_atropos_envs(openenv_python, served):
    r = subprocess.run(
        [
            openenv_python,
            str(HERE / "openenv_client_play.py"),
            served["arithmetic"].url,
            "arithmetic",
            "3",
            served["tools"].url,
            "tools",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    arithmetic, tools = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(arithmetic) == 3
    for ep in arithmetic:
        (step,) = ep["steps"]  # one model call per rollout
        assert step["prompt"].endswith("=") and step["roles"] == []
        assert ep["done"] and ep["reward"] == 1.0  # the env's own score of the right sum
        assert ep["metadata"]["kept"] and ep["metadata"]["steps"] == 1
    assert len(tools) == 2
    for ep in tools:
        first, second = ep["steps"]  # the tool call, its result fed back, then the answer
        assert first["roles"] == ["system", "user"] and "Fahrenheit" in first["prompt"]
        assert second["roles"] == ["system", "user", "assistant", "tool"]
        assert "<tool_response>" in second["prompt"]
        assert ep["done"] and ep["reward"] == 0.0  # 0 is not the temperature asked for


def test_more_sessions_than_allowed_are_refused_and_steps_need_the_field(served):
    url = served["one"].url

    async def run() -> None:
        async with OpenEnvSession(url, message_timeout=30) as first:
            await first.reset()
            with pytest.raises(EpisodeError) as refused:
                async with OpenEnvSession(url, message_timeout=30) as second:
                    await second.reset()
            assert refused.value.kind == "refused"
            with pytest.raises(EpisodeError) as bad:
                await first.step({"text": "7"})
            assert bad.value.kind == "error" and "'message'" in str(bad.value)
            done = await first.step({"message": "nope"})
            assert done.done and done.reward == 0.0
            with pytest.raises(EpisodeError, match="send reset"):
                await first.step({"message": "again"})

    asyncio.run(run())


def test_serve_openenv_help_and_bad_flags(plugin_path):
    env = dict(os.environ, PYTHONPATH=plugin_path)
    script = str(REPO / "environments" / "arithmetic_server.py")
    usage = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, env=env
    )
    assert "serve-openenv" in usage.stdout
    h = subprocess.run(
        [sys.executable, script, "serve-openenv", "--help"], capture_output=True, text=True, env=env
    )
    assert h.returncode == 0 and "--max-sessions" in h.stdout
    bad = subprocess.run(
        [sys.executable, script, "serve-openenv", "--port", "x"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --port: 'x' is not a whole number"


def test_resets_with_one_seed_share_an_item(served):
    """A GRPO group resets its episodes with one seed: they all get the item the first one took."""

    async def prompts(seeds: list) -> list[str]:
        out = []
        async with OpenEnvSession(served["arithmetic"].url, message_timeout=30) as s:
            for seed in seeds:
                result = await s.reset(**({} if seed is None else {"seed": seed}))
                out.append(result.observation["prompt"])
        return out

    first = asyncio.run(prompts([101, 101, 102, 101, None, None, 102]))
    assert first[0] == first[1] == first[3]  # seed 101 keeps its item
    assert first[2] == first[6]  # and 102 its own
    # the seeds are the server's, not the session's: a new session gets the same items
    again = asyncio.run(prompts([101, 102]))
    assert again == [first[0], first[2]]

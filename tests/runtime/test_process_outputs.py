"""``process``'s output file: an unusable ``--env.data_path_to_save_groups`` is one ``error:`` line
(status 2) before anything runs, and a run that writes no group leaves no JSONL or HTML behind, so
the next run writes to the name asked for (not ``g_1.jsonl``).

Real subprocesses against the fake OpenAI-compatible server (or a port nothing listens on), plus
the CLI's ``main`` in-process for the refusals, which happen before any tokenizer or server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atroposlib.runtime.cli import main
from atroposlib.runtime.sinks import JsonlGroupWriter
from atroposlib.utils.net import free_port
from tests.envs.example_env import AdditionEnv
from tests.envs.helpers import run_env

SETUP_FAILS_ENV = Path(__file__).with_name("setup_fails_env.py")
FLAG = "--env.data_path_to_save_groups"


def _args(base_url: str, tok_dir: Path, out: str, *extra: str) -> list[str]:
    return [
        "--openai.base_url",
        base_url,
        "--env.tokenizer_name",
        str(tok_dir),
        "--env.total_steps",
        "2",
        FLAG,
        out,
        *extra,
    ]


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_process_with_groups_path_none_is_one_line_not_a_traceback(tok_dir, tmp_path):
    r = run_env("process", *_args("http://127.0.0.1:9/v1", tok_dir, "none"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and _error_lines(r.stderr) == [r.stderr.strip()], r.stderr
    assert FLAG in r.stderr and "none" in r.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


@pytest.mark.parametrize(
    "value, says",
    [
        ("", "empty"),
        ("{dir}", "is a directory"),
        ("{dir}/", "names a directory"),
        ("{file}/sub/g.jsonl", "is not a directory"),
        ("/proc/no-such/g.jsonl", "cannot write files under"),
    ],
)
def test_an_unusable_groups_path_is_refused_before_anything_runs(
    value, says, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("keep\n")
    path = value.format(dir=tmp_path / "d", file=tmp_path / "f")
    argv = ["process", "--env.tokenizer_name", "no-such-tokenizer", FLAG, path]
    with pytest.raises(SystemExit) as exit_:
        main(AdditionEnv, argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: invalid value for {FLAG}: ") and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"] and not any(
        (tmp_path / "d").iterdir()
    )


def test_a_writer_that_writes_nothing_creates_nothing(tmp_path):
    w = JsonlGroupWriter(tmp_path / "new" / "g.jsonl")
    w.close()
    assert w.count == 0 and not (tmp_path / "new").exists()


def test_process_failing_in_setup_leaves_no_file(tok_dir, tmp_path):
    out = tmp_path / "out" / "g.jsonl"
    r = run_env(
        "process",
        *_args("http://127.0.0.1:9/v1", tok_dir, str(out)),
        cwd=tmp_path,
        env_file=SETUP_FAILS_ENV,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert _error_lines(r.stderr) == [
        "error: --env.dataset_name 'no-such-dataset' is not available on this machine"
    ], r.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_process_with_no_server_leaves_no_file_and_the_next_run_gets_the_name(
    fake_server, tok_dir, tmp_path
):
    out = tmp_path / "g.jsonl"
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    r = run_env(
        "process",
        *_args(url, tok_dir, str(out), "--env.unreachable_timeout", "1"),
        cwd=tmp_path,
        timeout=90,
    )
    assert r.returncode == 1 and len(_error_lines(r.stderr)) == 1, r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []
    r = run_env("process", *_args(fake_server.base_url, tok_dir, str(out)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.html", "g.jsonl"]

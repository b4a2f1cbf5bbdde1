"""Every code block of docs/environments.md runs as written, in order, against the tiny model served by
the CPU engine: the env files it shows are written where their first line says, the commands run in
a shell from the folder holding ``runs/`` and ``environments/``. Only the ports change (the docs' 9001
and 8000 become free loopback ports). A block the test does not know how to run fails it, so a new
block cannot go unchecked."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from atroposlib.utils.net import free_port, wait_for_http
from tests.envs.helpers import FakeTrainer
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "environments.md"


def _blocks(doc: str) -> list[tuple[str, str]]:
    """(info string, code) of every fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", doc, re.S | re.M)


def _inline(doc: str, command: str) -> str:
    """The inline code span of the prose that starts with ``command``."""
    match = re.search(rf"`({re.escape(command)} [^`]+)`", doc)
    assert match, f"the docs no longer show `{command} ...`"
    return match.group(1)


class Shell:
    """Runs the docs' commands in ``cwd`` with the console scripts of this Python on PATH."""

    def __init__(self, cwd: Path, engine_port: int, api_port: int) -> None:
        self.cwd = cwd
        self.ports = {"9001": str(engine_port), "8000": str(api_port)}
        bindir = os.path.dirname(sys.executable)
        self.env = {
            **os.environ,
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "WANDB_MODE": "disabled",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
        }
        self.env.pop("PYTHONPATH", None)  # the installed package only

    def local(self, text: str) -> str:
        for doc_port, port in self.ports.items():
            text = text.replace(f"localhost:{doc_port}", f"127.0.0.1:{port}")
            text = text.replace(f"--port {doc_port}", f"--port {port}")
        return text

    def run(self, script: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """``script`` in bash (its own process group, killed afterwards with what it left)."""
        proc = subprocess.Popen(
            ["bash", "-c", self.local(script)],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_code_block_of_the_environments_doc_runs_as_written(tmp_path, run_api):
    doc = DOC.read_text()
    blocks = _blocks(doc)
    sh = Shell(tmp_path, free_port(), free_port())
    files, commands = [], []
    for info, code in blocks:
        first = code.splitlines()[0]
        if info == "python" and re.match(r"# environments/\w+\.py", first):
            path = tmp_path / first.split()[1].rstrip(":")
            path.parent.mkdir(exist_ok=True)
            path.write_text(sh.local(code))
            files.append(path.name)
        else:
            commands.append(code)
    assert sorted(files) == [
        "addition.py",
        "addition_eval.py",
        "addition_scored.py",
        "test_addition.py",
    ], files

    made = sh.run(_inline(doc, "atropos-make-tiny-model"))
    assert made.returncode == 0, made.stderr[-2000:]
    engine_log = open(tmp_path / "engine.log", "wb")
    engine = subprocess.Popen(
        ["bash", "-c", "exec " + sh.local(_inline(doc, "atropos-serve-model"))],
        cwd=tmp_path,
        env=sh.env,
        stdout=engine_log,
        stderr=subprocess.STDOUT,
    )
    ran: list[str] = []
    try:
        wait_for_http(f"http://127.0.0.1:{sh.ports['9001']}/health", timeout=180, proc=engine)
        for code in commands:
            if " process " in code:
                r = sh.run(code)
                assert r.returncode == 0, r.stderr[-3000:]
                out = Path(re.search(r"--env.data_path_to_save_groups (\S+)", code).group(1))
                steps = int(re.search(r"--env.total_steps (\d+)", code).group(1))
                assert len(read_jsonl(tmp_path / out)) == steps, r.stderr[-3000:]
                assert (tmp_path / out).with_suffix(".html").is_file()
                ran.append(f"process {out.name}")
            elif code.startswith("run-api"):  # serve without a trainer: the exporter plays it
                r = sh.run(code)
                assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
                assert len(read_jsonl(tmp_path / "try.jsonl")) == 18, r.stdout + r.stderr[-3000:]
                assert "18 seqs saved" in r.stdout and "no such job" not in r.stderr, r.stderr
                assert re.search(r"groups read: [1-9]", r.stdout), r.stdout
                ran.append("serve without a trainer")
            elif " serve " in code:  # against a run-api and a trainer, as the docs assume
                api = run_api(port=int(sh.ports["8000"]))
                trainer = FakeTrainer(api.url, batch_size=8, num_steps=3)
                trainer.start()
                try:
                    r = sh.run(code)
                finally:
                    trainer.halt.set()
                    api.stop()
                assert r.returncode == 0, r.stderr[-3000:]
                assert len(trainer.batches) == 3, r.stderr[-3000:]
                ran.append("serve")
            elif " evaluate " in code:
                r = sh.run(code)
                assert r.returncode == 0, r.stderr[-3000:]
                metrics = json.loads((tmp_path / "evals" / "addition" / "metrics.json").read_text())
                assert "eval/accuracy" in json.dumps(metrics), metrics
                ran.append("evaluate")
            else:
                pytest.fail(f"docs/environments.md has a block this test does not run:\n{code}")
        how = re.search(
            r"\(run with: (.+?)\)", (tmp_path / "environments" / "test_addition.py").read_text()
        )
        assert how, "the check_env example says how to run it"
        r = sh.run(how.group(1) + " -q -p no:cacheprovider")
        assert r.returncode == 0, r.stdout[-3000:]
        ran.append("check_env")
    finally:
        engine.terminate()
        try:
            engine.wait(20)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait(10)
        engine_log.close()
    assert ran == [
        "process scored.jsonl",
        "process addition.jsonl",
        "serve",
        "serve without a trainer",
        "evaluate",
        "check_env",
    ], ran

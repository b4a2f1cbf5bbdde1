"""The shipped tasks: the tracked folders are exactly what their generator writes, and in the host
sandbox every task's reference solution passes and doing nothing fails. (The recall commands of the
training tasks are run by the demo's warm-up itself, which refuses one that does not pass.)"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from atroposlib.interop.harbor.bwrap import CommandLimits
from atroposlib.interop.harbor.host_sandbox import HostSandbox, make_trial_dir
from atroposlib.interop.harbor.task import HarborTask, find_tasks
from tests.interop.harbor.conftest import TASKS

AT_ONCE = 8


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for split in ("warmup", "train", "heldout")
        for p in sorted((root / split).rglob("*"))
        if p.is_file()
    }


def test_the_tracked_tasks_are_the_generators_output(tmp_path):
    done = subprocess.run(
        [sys.executable, str(TASKS / "generate.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    made, tracked = _tree(tmp_path), _tree(TASKS)
    assert len(made) > 400 and made == tracked


async def _outcomes(
    task: HarborTask, trials: Path, gate: asyncio.Semaphore
) -> tuple[str, list[float]]:
    """The verifier's rewards after doing nothing, then after the reference solution."""
    solve = task.solution_script.read_text()  # type: ignore[union-attr]
    async with gate, HostSandbox(task, make_trial_dir(trials), CommandLimits()) as box:
        nothing = (await box.verify())["reward"]
        done = await box.run(solve)
        assert done.exit_code == 0 and done.output == "", (task.name, done)
        return str(task.path.relative_to(TASKS)), [nothing, (await box.verify())["reward"]]


@pytest.mark.usefixtures("bwrap")
def test_each_reference_solution_passes_and_doing_nothing_fails(trials):
    async def go():
        gate = asyncio.Semaphore(AT_ONCE)
        return await asyncio.gather(*[_outcomes(t, trials, gate) for t in find_tasks(TASKS)])

    results = dict(asyncio.run(go()))
    assert len(results) == 80
    assert {name: r for name, r in results.items() if r != [0.0, 1.0]} == {}

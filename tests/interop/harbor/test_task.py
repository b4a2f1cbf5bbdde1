"""Reading Harbor task folders: a shipped task read whole, limits from task.toml, and a folder that is
not a task refused with one line naming the file it lacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from atroposlib.errors import ConfigError, NotAHarborTask
from atroposlib.interop.harbor.task import find_tasks, read_task
from tests.interop.harbor.conftest import TASKS


def test_a_shipped_task_is_read_with_its_limits():
    task = read_task(TASKS / "train" / "count-00")
    assert task.name == "count-00" and task.instruction.startswith("Count the lines of /app/")
    assert task.dockerfile == task.path / "environment" / "Dockerfile"
    assert task.solution_script == task.path / "solution" / "solve.sh"
    limits = task.limits
    assert (limits.agent_timeout_s, limits.verifier_timeout_s) == (120.0, 30.0)
    assert (limits.max_turns, limits.command_timeout_s, limits.max_output_bytes) == (3, 10.0, 1024)
    assert task.metadata["warmup"]["recall_command"].startswith("echo ")
    assert not task.multi_step and task.network_mode == "public"


def test_the_shipped_tasks_split_into_warm_up_train_and_held_out():
    splits = {s: find_tasks(TASKS / s) for s in ("warmup", "train", "heldout")}
    assert {s: len(t) for s, t in splits.items()} == {"warmup": 20, "train": 40, "heldout": 20}
    assert len(find_tasks(TASKS)) == 80  # a folder of folders of tasks
    for tasks in splits.values():
        assert {t.metadata["family"] for t in tasks} == {
            "count",
            "find",
            "rename",
            "extract",
            "fix",
        }
    instructions = [t.instruction for tasks in splits.values() for t in tasks]
    assert len(set(instructions)) == 80  # no task repeats another's, in any split


@pytest.mark.parametrize(
    "remove, named",
    [
        ("task.toml", "it has no task.toml"),
        ("instruction.md", "it has no instruction.md"),
        ("tests/test.sh", "it has no tests/test.sh"),
        ("environment/Dockerfile", "it has no environment/Dockerfile"),
    ],
)
def test_a_folder_that_is_not_a_task_names_the_missing_file(tmp_path, remove, named):
    folder = tmp_path / "t"
    shutil.copytree(TASKS / "train" / "rename-00", folder)
    (folder / remove).unlink()
    with pytest.raises(NotAHarborTask) as caught:
        read_task(folder)
    message = str(caught.value)
    assert message == f"{folder} is not a Harbor task: {named}" or (
        remove == "environment/Dockerfile"
        and message.startswith(f"{folder} is not a Harbor task: {named} (nor")
    )
    assert "\n" not in message and isinstance(caught.value, ConfigError)


def test_bad_settings_and_empty_folders_are_one_line(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(TASKS / "train" / "fix-00", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("max_turns = 3", "max_turns = 0"))
    with pytest.raises(
        NotAHarborTask,
        match=r"metadata\.limits\.max_turns in task\.toml must be a positive integer$",
    ):
        read_task(folder)
    toml.write_text("[agent\n")
    with pytest.raises(NotAHarborTask, match="task.toml is not valid TOML"):
        read_task(folder)
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    with pytest.raises(NotAHarborTask, match=r"no task\.toml in it or below it$"):
        find_tasks(empty)
    with pytest.raises(NotAHarborTask, match="no such folder"):
        find_tasks(tmp_path / "missing")


def test_a_task_without_limits_leaves_them_to_the_flags(tmp_path: Path):
    folder = tmp_path / "t"
    shutil.copytree(TASKS / "train" / "find-00", folder)
    (folder / "task.toml").write_text('schema_version = "1.4"\n')
    limits = read_task(folder).limits
    assert (limits.agent_timeout_s, limits.max_turns, limits.command_timeout_s) == (
        None,
        None,
        None,
    )
    assert limits.verifier_timeout_s == 600.0  # Harbor's own default

"""The harbor preset's pieces: the warm-up's episodes played for real in the host sandbox (both ways
right, a wrong one refused), held-out episodes played greedily by a real (taught) tiny model under the
env's rules, and the unscored training episodes read from the env's groups file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from atroposlib.interop.harbor.bwrap import missing_bwrap
from atroposlib.interop.harbor.episode import shell_system_prompt
from atroposlib.interop.harbor.host_sandbox import make_trial_dir
from atroposlib.interop.harbor.task import read_task
from atroposlib.testing import tiny_tokenizer_dir
from demo.harbor_heldout import HELDOUT_TASKS, WARMUP_TASKS

SYSTEM = shell_system_prompt()
pytestmark = pytest.mark.skipif(missing_bwrap() is not None, reason=str(missing_bwrap()))


@pytest.fixture
def trials():
    folder = make_trial_dir(prefix="harbor-demo-tests-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_warm_up_shows_both_right_ways_with_their_real_replies(trials, tmp_path):
    from demo.harbor_warmup import sampler, warmup_episodes

    tasks = [read_task(WARMUP_TASKS / name) for name in ("count-00", "rename-00")]
    episodes = warmup_episodes(tasks, SYSTEM, trials)
    compute, recall = episodes["compute"], episodes["recall"]
    assert [e[1]["content"] for e in compute] == [t.instruction for t in tasks]
    assert "wc -l <" in compute[0][2]["content"] and "echo " in recall[0][2]["content"]
    assert (
        compute[0][3]["content"] == '<tool_response>{"exit_code": 0, "output": ""}</tool_response>'
    )
    assert all(e[4] == {"role": "assistant", "content": "Done."} for e in compute + recall)
    import random

    drawn = sampler(episodes, 1.0)(random.Random(0), 6)
    assert all(d in compute for d in drawn)
    broken = tmp_path / "count-00"
    shutil.copytree(WARMUP_TASKS / "count-00", broken)
    toml = broken / "task.toml"
    toml.write_text(toml.read_text().replace('recall_command = "echo ', 'recall_command = "echo 1'))
    with pytest.raises(
        RuntimeError, match=r"^warm-up: the recall command of task count-00 scores 0.0, not 1$"
    ):
        warmup_episodes([read_task(broken)], SYSTEM, trials)


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A tiny model taught one held-out task's right episode (its call, then "Done."), ChatML."""
    from atroposlib.testing.taught_model import build_taught_model
    from demo.harbor_warmup import warmup_episodes

    folder = make_trial_dir(prefix="harbor-demo-taught-")
    [gold] = warmup_episodes([read_task(HELDOUT_TASKS / "count-00")], SYSTEM, folder)["compute"]
    shutil.rmtree(folder, ignore_errors=True)
    chatml = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir())).chat_template
    replies = [(gold[:2], gold[2]["content"]), (gold[:4], gold[4]["content"])]
    return build_taught_model(
        tmp_path_factory.mktemp("taught") / "model", replies, chat_template=chatml
    )


def test_held_out_episodes_follow_the_env_rules(taught, trials):
    from demo.chat_policy import load_chat_policy
    from demo.harbor_episodes import play_harbor_episodes, summarize

    model, tok = load_chat_policy(taught)
    tasks = [read_task(HELDOUT_TASKS / name) for name in ("count-00", "fix-00")]
    episodes = play_harbor_episodes(
        model, tok, tasks, SYSTEM, trials, max_new_tokens=160, max_length=2048
    )
    right, other = episodes
    assert (right.outcome, right.turns, right.valid_calls, right.score) == ("finished", 2, 1, 1.0)
    assert (
        right.transcript[3]["content"]
        == '<tool_response>{"exit_code": 0, "output": ""}</tool_response>'
    )
    assert other.done and other.score == 0.0
    figures = summarize(episodes)
    assert figures["success"] == 0.5 and figures["unavailable"] == 0.0
    assert list(trials.iterdir()) == []  # every trial's folder removed


def test_unscored_training_episodes_are_read_from_the_groups_file(tmp_path: Path):
    from demo.harbor_report import unscored_training_episodes

    rows = [
        {"overrides": [{"episode": {"failure": None}}, {"episode": {"failure": "verifier"}}]},
        {"overrides": [{"episode": {"failure": "verifier"}}, {"episode": {"failure": "start"}}]},
    ]
    (tmp_path / "groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert unscored_training_episodes(tmp_path) == {"verifier": 2, "start": 1}

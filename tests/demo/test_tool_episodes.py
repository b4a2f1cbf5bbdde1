"""The calculator demo's pieces: the warm-up's labels, held-out episodes played with a real (taught)
tiny model under the env's rules, and the token-exactness count read from the env's groups file."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from atroposlib.envkit.calculator_task import CalcProblem, gold_transcript, tool_system_prompt
from atroposlib.envkit.tool_calls import TOOLBOX
from atroposlib.testing import tiny_tokenizer_dir
from atroposlib.type_definitions import MASK_IGNORE
from demo.chat_sft import encode_conversation

TOOLS = {"calculator": TOOLBOX["calculator"]}
SYSTEM = tool_system_prompt(list(TOOLS.values()))


def test_warm_up_labels_are_the_assistant_turns_and_their_end_of_turn():
    tok = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    gold = gold_transcript(CalcProblem(12, 34), SYSTEM)
    ids, labels = encode_conversation(tok, gold)
    assert len(ids) == len(labels)
    rendered = tok.apply_chat_template(gold, tokenize=False)
    assert rendered.startswith(tok.decode(ids))  # the pieces add up to the rendered conversation
    trained, run = [], []
    for token, label in zip(ids, labels, strict=True):
        if label != MASK_IGNORE:
            assert label == token
            run.append(token)
        elif run:
            trained.append(tok.decode(run))
            run = []
    trained += [tok.decode(run)] if run else []
    assert trained == [gold[2]["content"] + tok.eos_token, gold[4]["content"] + tok.eos_token]


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A tiny model taught the gold episode of 12 * 34 (its call, then its answer), ChatML template."""
    from atroposlib.testing.taught_model import build_taught_model

    chatml = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir())).chat_template
    gold = gold_transcript(CalcProblem(12, 34), SYSTEM)
    replies = [(gold[:2], gold[2]["content"]), (gold[:4], gold[4]["content"])]
    return build_taught_model(
        tmp_path_factory.mktemp("taught") / "model", replies, chat_template=chatml
    )


def test_held_out_episodes_follow_the_env_rules(taught):
    from demo.chat_policy import load_chat_policy
    from demo.tool_episodes import play_episodes, summarize

    model, tok = load_chat_policy(taught)
    problems = [CalcProblem(12, 34), CalcProblem(56, 78)]
    episodes = play_episodes(
        model, tok, problems, SYSTEM, TOOLS, max_turns=3, max_new_tokens=96, max_length=1024
    )
    right = episodes[0]
    assert (right.outcome, right.turns, right.valid_calls) == ("correct", 2, 1)
    assert right.transcript[3]["content"] == '<tool_response>{"result": 408}</tool_response>'
    assert episodes[1].done and episodes[1].outcome != "correct"
    figures = summarize(episodes)
    assert figures["success"] == 0.5 and figures["mean_turns"] == (2 + episodes[1].turns) / 2
    cramped = play_episodes(
        model, tok, problems[:1], SYSTEM, TOOLS, max_turns=3, max_new_tokens=96, max_length=300
    )
    assert cramped[0].outcome == "out of room"  # the prompt alone is ~290 tiny-tokenizer tokens


def test_drifts_are_counted_from_the_env_groups_file(tmp_path):
    from demo.token_exactness import training_episodes

    def group(exact: list[bool], outcome: str) -> dict:
        return {
            "tokens": [[1]] * len(exact),
            "overrides": [{"episode": {"outcome": outcome}, "token_exact": e} for e in exact],
        }

    lines = [group([True, True], "correct"), group([True, False, True], "malformed tool call")]
    lines[1]["overlong"] = [True, False, True]  # two sequences cut (at max_tokens or the length)
    (tmp_path / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in lines))
    assert training_episodes(tmp_path) == {
        "sequences_checked": 5,
        "drifts": 1,
        "outcomes": {"correct": 2, "malformed tool call": 3},
        "overlong": 2,
    }
    assert training_episodes(tmp_path / "nothing-here")["sequences_checked"] == 0


def test_the_env_logs_last_word_on_managed_sessions_is_read(tmp_path):
    from demo.token_exactness import managed_counts

    log = tmp_path / "env.log"
    assert managed_counts(log) == {"managed_sessions": None, "managed_token_drifts": None}
    log.write_text(
        "2026-11-26 INFO atroposlib.runtime.runner: serve finished: groups=4\n"
        "2026-11-26 INFO atroposlib.runtime.runner: managed sessions: 128 managed session(s), "
        "2 token drift(s) (template: 2)\n"
    )
    assert managed_counts(log) == {"managed_sessions": 128, "managed_token_drifts": 2}


def test_every_episode_outcome_is_read_from_the_env_counters_line(tmp_path):
    """The groups file cannot show an episode that left no sequence (an agent that crashed before its
    first completion); serve's last ``env counters:`` line counts every one."""
    from demo.token_exactness import env_counters, episode_outcomes

    log = tmp_path / "env.log"
    log.write_text(
        "2026-12-02 INFO x: env counters: agent/outcome/answered=3 agent/outcome/crashed=0\n"
        "2026-12-02 INFO x: managed sessions: 8 managed session(s), 0 token drift(s)\n"
        "2026-12-02 INFO x: env counters: agent/outcome/answered=633 agent/outcome/crashed=1 "
        "agent/outcome/past_max_turns=7 agent/outcome/timed_out=0 train/token_drifts=0\n"
    )
    assert env_counters(log)["train/token_drifts"] == "0"
    assert episode_outcomes(log) == {
        "answered": 633,
        "crashed": 1,
        "past max turns": 7,
        "timed out": 0,
    }
    assert episode_outcomes(tmp_path / "missing.log") is None

"""mcqa_env, letter counting, text reversal and reasoning-gym envs end to end through check_env."""

import re

import pytest

from atroposlib.envkit.data_sources import load_mcqa
from atroposlib.envkit.mcqa import LETTERS
from atroposlib.errors import ConfigError
from atroposlib.testing import check_env


def test_mcqa_grades_letters_and_explains_rejections():
    from mcqa_env import MCQAEnv

    rows = load_mcqa(
        "procedural", "test", size=1000, seed=0
    ).rows  # what the env loads (hub_split "test")
    gold = {r["question"]: LETTERS[r["answer_index"]] for r in rows}

    def responder(prompt_text: str, body: dict) -> str:
        right = next((letter for q, letter in gold.items() if q in prompt_text), "?")
        wrong = "A" if right != "A" else "B"
        return [
            "<think>sure</think>Answer: " + right,
            "<think>hmm</think>Answer: " + wrong,
            "Answer: " + right,
            "<think>a</think> (A) or (B)",
        ][body["choice_index"]]

    groups = check_env(
        MCQAEnv,
        responder=responder,
        items=2,
        env_overrides={"group_size": 4, "data_source": "procedural", "eval_size": 5},
    )
    assert len(groups) == 2
    for group in groups:
        assert group["scores"] == [1.0, 0.0, 0.0, 0.0]
        notes = [conv[-1]["content"] for conv in group["messages"]]
        assert notes[0] == "correct" and notes[1].startswith("chose ")
        assert notes[2] == "no closed </think> block" and notes[3] == "ambiguous answer: A, B"


def test_letter_counting_and_text_reversal():
    from letter_counting_environment import LetterCountingEnv
    from text_reversal_environment import TextReversalEnv

    def count_responder(prompt_text: str, body: dict) -> str:
        found = re.search(r'letter "(.)" appear in "([^"]*)"', prompt_text)
        if found is None:
            return "question not found"
        letter, phrase = found.groups()
        count = phrase.count(letter) + body["choice_index"]  # right only for the first choice
        return f"<answer>{count}</answer>"

    groups = check_env(
        LetterCountingEnv, responder=count_responder, items=3, env_overrides={"group_size": 2}
    )
    assert all(group["scores"] == [1.0, 0.0] for group in groups)

    def reverse_responder(prompt_text: str, body: dict) -> str:
        found = re.search(r'character by character: "([^"]*)"', prompt_text)
        phrase = found.group(1) if found else "question not found"
        return f"<answer>{phrase[::-1] if body['choice_index'] == 0 else phrase + '!'}</answer>"

    groups = check_env(
        TextReversalEnv, responder=reverse_responder, items=3, env_overrides={"group_size": 2}
    )
    assert all(group["scores"] == [1.0, 0.0] for group in groups)


def test_reasoning_gym_scores_with_the_tasks_own_scorer():
    import reasoning_gym
    from reasoning_gym_environment import ReasoningGymEnv

    dataset = reasoning_gym.create_dataset("chain_sum", size=20, seed=7)
    gold = {entry["question"]: entry["answer"] for entry in dataset}

    def responder(prompt_text: str, body: dict) -> str:
        answer = next((a for q, a in gold.items() if q in prompt_text), "?")
        return [f"<answer>{answer}</answer>", "<answer>nonsense</answer>", "no tags"][
            body["choice_index"]
        ]

    groups = check_env(
        ReasoningGymEnv,
        responder=responder,
        items=2,
        env_overrides={
            "group_size": 3,
            "task": "chain_sum",
            "seed": 7,
            "dataset_size": 20,
            "eval_size": 2,
        },
    )
    assert all(group["scores"] == [1.0, 0.0, 0.0] for group in groups)
    with pytest.raises(ConfigError, match="did you mean"):
        check_env(ReasoningGymEnv, responses=["x"], env_overrides={"task": "chain_summ"})


def test_every_reasoning_gym_task_builds_offline_and_scores():
    from reasoning_gym.factory import DATASETS
    from reasoning_gym_environment import build_dataset

    perfect = 0
    tasks = sorted(
        name for name in DATASETS if name != "composite"
    )  # composite is a mixer, not a task
    for name in tasks:
        dataset = build_dataset(name, {}, size=1, seed=0)
        entry = dataset[0]
        score = dataset.score_answer(entry["answer"], entry)
        assert 0.0 <= score <= 1.0, name
        perfect += score == 1.0
    assert len(tasks) == 105
    # a few tasks (e.g. graph_color) ship no canonical answer and score only a valid one
    assert perfect >= 95

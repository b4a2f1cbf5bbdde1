"""The batched generation loop in process: logprobs match a plain forward pass, batching is invisible."""

from __future__ import annotations

import pytest
import torch

from atroposlib.inference.generation import generate_batch
from atroposlib.inference.loading import load_model_dir
from atroposlib.inference.sampling import RowParams, sample_next

PROMPTS = [
    "What is 1 + 2?",
    "Hello there my friend, how are",
    "x",
    "Count the letters in apple please",
]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    torch.set_num_threads(1)
    return load_model_dir(tiny_model_dir)


def _gen(lm, rows):
    return generate_batch(lm.model, rows, pad_id=lm.pad_id, eos_ids=lm.eos_ids, decode=lm.decode)


def _rows(lm, **kw):
    return [RowParams(prompt_ids=lm.tokenizer(p)["input_ids"], **kw) for p in PROMPTS]


def test_logprobs_match_plain_forward_with_left_padding(lm):
    rows = _rows(lm, max_tokens=12, temperature=1.0, seed=7, ignore_eos=True)
    results = _gen(lm, rows)
    worst = 0.0
    for row, res in zip(rows, results, strict=True):
        assert len(res.token_ids) == 12 and len(res.logprobs) == 12
        ids = torch.tensor([row.prompt_ids + res.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(lm.model(ids).logits[0].float(), dim=-1)
        start = len(row.prompt_ids) - 1
        ref = (
            logp[start : start + 12]
            .gather(-1, torch.tensor(res.token_ids).unsqueeze(-1))
            .squeeze(-1)
        )
        worst = max(worst, (ref - torch.tensor(res.logprobs)).abs().max().item())
    assert worst < 1e-4


def test_batched_rows_equal_rows_run_alone(lm):
    for kw in ({"temperature": 0.0}, {"temperature": 1.0, "top_p": 0.9, "top_k": 40, "seed": 11}):
        rows = _rows(lm, max_tokens=10, ignore_eos=True, **kw)
        assert len(rows) == len(PROMPTS) > 1
        alone = [_gen(lm, [r])[0].token_ids for r in rows]
        together = [r.token_ids for r in _gen(lm, rows)]
        assert together == alone


def test_stop_string_truncates_text_and_sets_finish_reason(lm):
    base = _gen(lm, _rows(lm, max_tokens=20, temperature=0.0, ignore_eos=True)[:1])[0]
    assert base.finish_reason == "length"
    stop = base.text[6:9]
    assert stop
    res = _gen(
        lm,
        [
            RowParams(
                prompt_ids=lm.tokenizer(PROMPTS[0])["input_ids"],
                max_tokens=20,
                temperature=0.0,
                stop=[stop],
                ignore_eos=True,
            )
        ],
    )[0]
    assert res.finish_reason == "stop" and res.stop_reason == stop
    assert res.text == base.text[: base.text.find(stop)]
    assert stop not in res.text
    assert len(res.token_ids) < 20


def test_eos_ends_a_row_unless_ignored(lm):
    prompt = lm.tokenizer(PROMPTS[1])["input_ids"]
    first = _gen(lm, [RowParams(prompt_ids=prompt, max_tokens=1, temperature=0.0)])[0].token_ids[0]
    row = RowParams(prompt_ids=prompt, max_tokens=6, temperature=0.0)
    res = generate_batch(lm.model, [row], pad_id=lm.pad_id, eos_ids={first}, decode=lm.decode)[0]
    assert res.finish_reason == "stop" and res.token_ids == [first]
    row.ignore_eos = True
    res = generate_batch(lm.model, [row], pad_id=lm.pad_id, eos_ids={first}, decode=lm.decode)[0]
    assert res.finish_reason == "length" and len(res.token_ids) == 6


def test_top_p_keeps_only_the_best_token_when_tiny():
    logits = torch.zeros(2, 10)
    logits[:, 3] = 5.0
    g = [torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)]
    picked = sample_next(
        logits, torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.01]), torch.tensor([0, 0]), g
    )
    assert picked.tolist() == [3, 3]


def test_top_k_one_is_greedy(lm):
    logits = torch.randn(8, 50, generator=torch.Generator().manual_seed(1))
    gens = [torch.Generator().manual_seed(i) for i in range(8)]
    out = sample_next(
        logits, torch.full((8,), 1.5), torch.ones(8), torch.ones(8, dtype=torch.long), gens
    )
    assert out.tolist() == logits.argmax(-1).tolist()


def test_rows_added_mid_generation_match_rows_run_alone(lm):
    from atroposlib.inference.generation import DecodeBatch

    long_prompt = (
        "Spell the word banana backward and then count all of the letters in it, twice over"
    )
    prompts = [PROMPTS[0], PROMPTS[2], long_prompt, PROMPTS[1]]
    rows = [
        RowParams(
            prompt_ids=lm.tokenizer(p)["input_ids"],
            max_tokens=6 + 3 * i,
            temperature=1.0,
            seed=20 + i,
            ignore_eos=True,
        )
        for i, p in enumerate(prompts)
    ]
    alone = [_gen(lm, [r])[0] for r in rows]
    batch = DecodeBatch(lm.model, pad_id=lm.pad_id, eos_ids=lm.eos_ids, decode=lm.decode)
    first = batch.add(rows[:2])
    for _ in range(3):
        batch.step()
    second = batch.add(rows[2:3])  # longer prompt than the running cache
    batch.step()
    third = batch.add(rows[3:])  # shorter prompt, joins a wider cache
    while len(batch):
        batch.step()
    merged = first + second + third
    assert all(r.done for r in merged)
    for a, b in zip(alone, merged, strict=True):
        assert b.token_ids == a.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4

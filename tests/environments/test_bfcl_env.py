"""The BFCL env against the fake OpenAI server over real HTTP, scored by the real official checker:
``evaluate`` reports each category and BFCL's aggregate exactly as the scripted answers earn them
(metrics.json, samples.jsonl with every verdict), a training group is rewarded by the checker's verdict
with its reason kept and malformed answers counted, and a missing checker or an unknown category is
one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atroposlib.interop.bfcl import LIVE_AST, Answer, BfclChecker, bfcl_missing, gold_text
from atroposlib.interop.bfcl.gold import gold_arguments
from atroposlib.runtime.config_loader import load_config
from atroposlib.testing import FakeOpenAIServer, tiny_tokenizer_dir

REPO = Path(__file__).resolve().parents[2]
ROOM = ["--env.max_token_length", "16384"]  # the tiny byte-level tokenizer spends many tokens


@pytest.fixture(scope="module")
def gold_by_question():
    """Question text -> gold answer, for every entry of the categories the tests ask."""
    reason = bfcl_missing()
    if reason:
        pytest.skip(reason)
    with BfclChecker.start() as checker:
        loaded = checker.load(list(LIVE_AST) + ["simple_python", "parallel", "irrelevance"])
    return {
        e.question: (e, gold_text(e.ground_truth) if e.ground_truth else "I cannot help.")
        for rows in loaded.values()
        for e in rows
    }


def _live_simple_with_a_required_value(gold_by_question):
    """(entry, gold answer) of a live_simple entry with a parameter whose accepted value is not empty."""
    return next(
        v
        for v in gold_by_question.values()
        if v[0].category == "live_simple"
        and any(accepted != [""] for accepted in next(iter(v[0].ground_truth[0].values())).values())
    )


def _env(fake: FakeOpenAIServer, sub: str, *flags: str):
    from bfcl_env import BfclEnv

    loaded = load_config(
        BfclEnv,
        sub,
        [
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            fake.base_url,
            "--openai.model_name",
            "m",
            "--openai.server_type",
            "vllm",
            *ROOM,
            *flags,
        ],
    )
    return BfclEnv(config=loaded.env, server_configs=loaded.servers)


def _answer_half(gold_by_question):
    """A responder giving the gold answer to every other question (by id parity), prose otherwise."""

    def reply(prompt: str, body: dict) -> str:
        for question, (entry, gold) in gold_by_question.items():
            if question in prompt:
                return gold if int(entry.id.rsplit("_", 1)[1]) % 2 == 0 else "Let me think."
        return "?"

    return reply


def test_evaluate_reports_each_category_and_bfcls_aggregate(gold_by_question, tmp_path):
    responder = _answer_half(gold_by_question)
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=responder, model="m") as fake:
        env = _env(
            fake,
            "evaluate",
            "--env.categories",
            '["simple_python", "parallel", "irrelevance"]',
            "--env.per_category",
            "6",
            "--env.data_dir_to_save_evals",
            str(tmp_path),
        )

        async def run() -> None:
            await env.setup()
            try:
                await env.evaluate()
            finally:
                env.checker.close()

        asyncio.run(run())
    samples = [
        json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().split("\n") if line
    ]
    assert len(samples) == 18
    expected = {}
    for category in ("simple_python", "parallel", "irrelevance"):
        rows = [s for s in samples if s["category"] == category]
        # irrelevance: prose and the refusal both hold no call, so every answer is right
        even = [int(s["id"].rsplit("_", 1)[1]) % 2 == 0 for s in rows]
        expected[category] = 1.0 if category == "irrelevance" else sum(even) / len(rows)
        assert [s["valid"] for s in rows] == ([True] * 6 if category == "irrelevance" else even)
        for s in rows:
            if not s["valid"]:
                assert s["error_type"] == "ast_decoder:decoder_failed" and s["errors"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())["results"]["all"]
    for category, value in expected.items():
        assert metrics[f"eval/{category}"] == pytest.approx(value)
    assert "eval/non_live_ast" not in metrics  # multiple and parallel_multiple were not asked


def test_fc_mode_reads_hermes_tool_calls_through_the_managed_server(gold_by_question, tmp_path):
    """FC mode: the tools go in a Hermes system prompt (the tiny ChatML template ignores tools=), the
    reply's <tool_call> blocks are parsed by the managed server, and the checker takes the calls with
    BFCL's FC names (``.`` as ``_``)."""

    def reply(prompt: str, body: dict) -> str:
        assert "<tools>" in prompt  # the tools reached the model
        for question, (entry, _) in gold_by_question.items():
            if question in prompt and entry.category == "parallel":
                calls = [
                    {"name": name.replace(".", "_"), "arguments": gold_arguments(accepted)}
                    for call in entry.ground_truth
                    for name, accepted in call.items()
                ]
                return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
        return "no idea"

    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=reply, model="m") as fake:
        env = _env(
            fake,
            "evaluate",
            "--env.categories",
            '["parallel"]',
            "--env.per_category",
            "4",
            "--env.mode",
            "fc",
            "--env.max_answer_tokens",
            "4096",  # the tiny byte-level tokenizer spends a token per character of the JSON
            "--env.data_dir_to_save_evals",
            str(tmp_path),
        )

        async def run() -> None:
            await env.setup()
            try:
                await env.evaluate()
            finally:
                env.checker.close()

        asyncio.run(run())
    samples = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().split("\n") if x]
    assert [s["valid"] for s in samples] == [True] * 4, samples[0]
    assert all(s["calls"] and "." not in s["calls"][0]["name"] for s in samples)
    assert not any(s["cut"] for s in samples)


def test_a_training_group_is_rewarded_by_the_official_verdict(gold_by_question):
    entry, gold = next(v for v in gold_by_question.values() if v[0].category == "live_simple")
    with FakeOpenAIServer(
        tokenizer=tiny_tokenizer_dir(), responses=[gold, "Here you go: spotify"], model="m"
    ) as fake:
        env = _env(fake, "process", "--env.group_size", "2")

        async def run():
            await env.setup()
            env.checker.load(["live_simple"])  # what building the pool does first
            try:
                return await env.collect_trajectories(entry)
            finally:
                env.checker.close()

        group, backlog = asyncio.run(run())
    assert backlog == [] and sorted(group.scores) == [0.0, 1.0]
    notes = sorted(m[-1]["content"] for m in group.messages)
    assert notes[0].startswith("ast_decoder:decoder_failed") and notes[1] == "valid"
    assert env.tally.counts["train/outcome/valid"] == 1
    assert env.tally.counts["train/outcome/malformed"] == 1
    assert group.overrides == [{"bfcl_id": entry.id, "category": "live_simple"}] * 2


def test_partial_credit_goes_to_as_many_calls_as_asked_and_only_to_them(gold_by_question):
    """With ``--env.partial_credit``, a rejected answer earns it when BFCL's checker rejected what is in
    the calls (here a missing parameter), not when it found no list or the wrong number of calls."""
    entry, gold = _live_simple_with_a_required_value(gold_by_question)
    (name,) = entry.ground_truth[0]
    inner = gold.strip()[1:-1]
    answers = [gold, f"[{name}()]", f"[{inner}, {inner}]", "Here you go."]
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responses=answers, model="m") as fake:
        env = _env(fake, "process", "--env.group_size", "4", "--env.partial_credit", "0.25")

        async def run():
            await env.setup()
            env.checker.load(["live_simple"])
            try:
                return await env.collect_trajectories(entry)
            finally:
                env.checker.close()

        group, _ = asyncio.run(run())
    by_note = sorted(zip(group.scores, [m[-1]["content"] for m in group.messages], strict=True))
    assert [score for score, _ in by_note] == [0.0, 0.0, 0.25, 1.0], by_note
    zero_notes = sorted(note.split(":")[1] for _, note in by_note[:2])
    assert zero_notes == ["decoder_failed", "wrong_count"]
    assert by_note[2][1].startswith("simple_function_checker:missing_required")
    for kind in ("valid", "malformed", "wrong_count", "wrong_call"):
        assert env.tally.counts[f"train/outcome/{kind}"] == 1, kind


def _live_simple_group(entry, answers: list[str], *flags: str):
    """(the env's group for ``entry`` when the server answers ``answers``, the official verdicts of
    the same answers), with the env's reward flags ``flags``."""
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responses=answers, model="m") as fake:
        env = _env(fake, "process", "--env.group_size", str(len(answers)), *flags)

        async def run():
            await env.setup()
            env.checker.load(["live_simple"])
            try:
                group, _ = await env.collect_trajectories(entry)
                return group, env.checker.check([Answer(entry.id, text=a) for a in answers])
            finally:
                env.checker.close()

        return asyncio.run(run())


def test_strict_partial_credit_withholds_it_from_a_dropped_parameter_or_a_wrong_name(
    gold_by_question,
):
    """With ``--env.strict_partial_credit``, a call the checker rejects for a required parameter left
    out or a wrong function name earns 0; one rejected for a wrong value still earns the partial
    credit, and the gold answer 1."""
    from bfcl_env import reward

    entry, gold = _live_simple_with_a_required_value(gold_by_question)
    ((name, accepted),) = entry.ground_truth[0].items()
    param = next(k for k, v in accepted.items() if v != [""])
    wrong_value = gold_text([{name: {**accepted, param: ["not this"]}}])
    wrong_name = gold.replace(name, f"{name}_elsewhere", 1)
    answers = [gold, f"[{name}()]", wrong_value, wrong_name]
    group, verdicts = _live_simple_group(
        entry, answers, "--env.partial_credit", "0.25", "--env.strict_partial_credit", "true"
    )
    kinds = [(v.error_type or "valid").split(":")[-1] for v in verdicts]
    assert (kinds[0], kinds[1], kinds[3]) == ("valid", "missing_required", "wrong_func_name"), kinds
    assert kinds[2] not in ("missing_required", "wrong_func_name"), kinds  # a wrong value
    # each rollout keeps the answer as its assistant turn, then the grader's note
    by_answer = dict(zip([m[-2]["content"] for m in group.messages], group.scores, strict=True))
    assert [by_answer[a] for a in answers] == [1.0, 0.0, 0.25, 0.0], (kinds, by_answer)
    assert [reward(v, 0.25, strict=True) for v in verdicts] == [1.0, 0.0, 0.25, 0.0]
    assert [reward(v, 0.25) for v in verdicts] == [1.0, 0.25, 0.25, 0.25]  # not strict: all paid


def test_format_credit_is_a_floor_for_every_decodable_answer(gold_by_question):
    """With ``--env.format_credit``, a rejected answer BFCL's decoder reads earns at least it (a
    dropped parameter under strict partial credit, a wrong name, a wrong count of calls); a malformed
    one still earns 0, a wrong value the partial credit, the gold answer 1."""
    from bfcl_env import reward

    entry, gold = _live_simple_with_a_required_value(gold_by_question)
    ((name, accepted),) = entry.ground_truth[0].items()
    param = next(k for k, v in accepted.items() if v != [""])
    wrong_value = gold_text([{name: {**accepted, param: ["not this"]}}])
    twice = f"{gold[:-1]}, {gold[1:]}"
    answers = [
        gold,
        f"[{name}()]",
        wrong_value,
        gold.replace(name, f"{name}_x", 1),
        twice,
        "I can't",
    ]
    group, verdicts = _live_simple_group(
        entry,
        answers,
        *("--env.partial_credit", "0.25", "--env.strict_partial_credit", "true"),
        *("--env.format_credit", "0.1"),
    )
    kinds = [(v.error_type or "valid").split(":")[-1] for v in verdicts]
    assert kinds[4:] == ["wrong_count", "decoder_failed"], kinds
    by_answer = dict(zip([m[-2]["content"] for m in group.messages], group.scores, strict=True))
    assert [by_answer[a] for a in answers] == [1.0, 0.1, 0.25, 0.1, 0.1, 0.0], (kinds, by_answer)
    assert [reward(v, 0.25, strict=True) for v in verdicts] == [1.0, 0.0, 0.25, 0.0, 0.0, 0.0]
    assert [reward(v, 0.0, format_credit=0.1) for v in verdicts] == [1.0] + [0.1] * 4 + [0.0]


def test_part_credit_pays_a_composed_item_by_its_accepted_parts(gold_by_question):
    """With ``--env.part_credit``, a rejected answer to a composed item earns the share of its parts the
    official checker accepts (over the larger of parts and calls), or the partial credit where that is
    more; without it the same verdicts earn the verdict and partial credit alone."""
    from bfcl_env import reward

    singles = [e for e, _ in gold_by_question.values() if e.category == "live_simple"]
    names = list(dict.fromkeys(str(e.functions[0]["name"]) for e in singles))
    one, two = (next(e for e in singles if e.functions[0]["name"] == n) for n in names[:2])
    first, second = (gold_by_question[e.question][1].strip()[1:-1] for e in (one, two))
    answers = [f"[{first}, {second}]", f"[{first}]", f"[{first}, made_up(x=1)]", "Let me see."]
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responses=answers, model="m") as fake:
        env = _env(
            fake,
            "process",
            *("--env.group_size", "4", "--env.partial_credit", "0.25"),
            *("--env.part_credit", "true"),
        )

        async def run():
            await env.setup()
            env.checker.load(["live_simple"])
            (item,) = env.checker.compose([("composed_t", [one.id, two.id], "parallel_multiple")])
            try:
                group, _ = await env.collect_trajectories(item)
                verdicts = env.checker.check([Answer(item.id, text=a) for a in answers])
                return group, verdicts
            finally:
                env.checker.close()

        group, verdicts = asyncio.run(run())
    by_answer = dict(zip([m[-1]["content"] for m in group.messages], group.scores, strict=True))
    assert sorted(group.scores) == [0.0, 0.5, 0.5, 1.0], by_answer
    assert [reward(v, 0.25, part_credit=True) for v in verdicts] == [1.0, 0.5, 0.5, 0.0]
    assert [reward(v, 0.25) for v in verdicts] == [1.0, 0.0, 0.25, 0.0]
    assert group.overrides[0] == {"bfcl_id": "composed_t", "category": "parallel_multiple"}


def test_process_trains_through_the_runtime_on_checker_verdicts(gold_by_question, tmp_path):
    """``process`` (the runtime's loop: items from the pool, cleanup after each) writes groups whose
    rewards are the official verdicts: gold answers to live questions valid, the rest not."""

    def reply(prompt: str, body: dict) -> str:
        for question, (entry, gold) in gold_by_question.items():
            if entry.category.startswith("live") and question in prompt:
                return gold
        return "Sorry, I cannot."

    out = tmp_path / "groups.jsonl"
    with FakeOpenAIServer(tokenizer=tiny_tokenizer_dir(), responder=reply, model="m") as fake:
        done = _cli(
            "--env.tokenizer_name",
            str(tiny_tokenizer_dir()),
            "--openai.base_url",
            fake.base_url,
            "--openai.model_name",
            "m",
            "--openai.server_type",
            "vllm",
            "--env.total_steps",
            "3",
            "--env.group_size",
            "2",
            "--env.ensure_scores_are_not_same",
            "false",
            "--env.data_path_to_save_groups",
            str(out),
            *ROOM,
            sub="process",
        )
    assert done.returncode == 0, done.stderr[-2000:]
    groups = [json.loads(line) for line in out.read_text().split("\n") if line]
    assert len(groups) == 3
    for group in groups:
        notes = [m[-1]["content"] for m in group["messages"]]
        assert group["scores"] == [1.0 if n == "valid" else 0.0 for n in notes]
        live = group["overrides"][0]["category"].startswith("live")
        # a live entry gets its gold answer (valid); a composed one only a part's (a wrong call)
        assert all(n == "valid" for n in notes) if live else not any(n == "valid" for n in notes)


def _cli(*args: str, sub: str = "evaluate", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "environments" / "bfcl_env.py"), sub, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )


def test_a_missing_checker_or_an_unknown_category_is_one_line_and_a_failure():
    common = [
        "--env.tokenizer_name",
        str(tiny_tokenizer_dir()),
        "--openai.base_url",
        "http://127.0.0.1:9/v1",
    ]
    unknown = _cli(*common, "--env.categories", '["chess"]')
    assert unknown.returncode == 2
    (line,) = unknown.stderr.strip().split("\n")
    assert "unknown BFCL categories ['chess']; valid: simple_python, simple_java" in line
    missing = _cli(*common, ATROPOS_BFCL_PYTHON="/nonexistent/python")
    assert missing.returncode != 0
    last = missing.stderr.strip().split("\n")[-1]
    assert last.startswith("error: ") and "scripts/setup_bfcl.sh" in last

"""BFCL (the Berkeley Function Calling Leaderboard): evaluate any served model on it, and train on
function calling without touching its held-out entries, both scored by BFCL's official AST checker.

``evaluate`` asks every entry of ``--env.categories`` (default: BFCL's non-live AST categories in Python,
simple_python 400, multiple 200, parallel 200, parallel_multiple 200) greedily and prints accuracy per
category with one-standard-error bars and BFCL's own aggregate (``non_live_ast``: the unweighted mean of
the four; ``live_ast`` over the live ones, weighted by count), the checker's error types and how many
answers were malformed (not a list of calls) or cut at ``--env.max_answer_tokens``; ``metrics.json``
and ``samples.jsonl`` (every entry: reply, verdict, BFCL's error type) go to
``--env.data_dir_to_save_evals``. ``--env.per_category N`` evaluates a fixed, stratified subsample (the
same N entries of each category for a seed). ``--env.mode``: ``prompt`` is the leaderboard's "Prompt"
mode (BFCL's system prompt with the function docs; the reply is Python call text), ``fc`` its "FC" mode
(the functions as OpenAI tools through the managed server's Hermes tool parser). Any backend answers
(``--openai.server_type`` vllm, sglang, openai, or our engine).

``serve`` / ``process`` train in prompt mode on items that are not held out: BFCL's live AST entries
(a live question equal to a held-out one is left out) plus parallel and parallel_multiple items composed
from live_simple entries (``atroposlib.interop.bfcl.pool``), and with ``--env.synthetic N`` N items in the
non-live style written from our own function templates. Reward 1.0 when the official checker accepts
the answer, else 0.0; with ``--env.partial_credit C`` a rejected answer that is a list of as many calls
as asked (BFCL's error type is about what is in the calls, not ``decoder_failed`` or ``wrong_count``)
earns C: a graded reward read off the official verdict, which gives a small model's groups something to
tell apart; with ``--env.strict_partial_credit true`` not when BFCL says a call leaves out a required
parameter or names a wrong function; with ``--env.format_credit F`` any other rejected answer
that BFCL's decoder reads as a list of calls earns F (a floor that keeps the format worth writing). With ``--env.part_credit true`` a rejected answer to a composed item earns the share of its
parts the official checker accepts one of its calls for (each part is a live_simple entry, checked on its
own; the share is over the larger of the parts asked and the calls written), when that is more: a second
right call is worth as much as the first. Every answer's verdict is its ``grader`` note, and each kind of failure is counted
(``train/outcome/<kind>``: ``valid``, ``malformed`` (no list of calls), ``wrong count``, ``wrong call``).

The checker runs in bfcl-eval's own environment (``scripts/setup_bfcl.sh``; ``ATROPOS_BFCL_PYTHON``
for your own), one worker process per env: without it, start-up fails with one line naming what to
install. An unknown category is one line listing the valid ones.

    python environments/bfcl_env.py evaluate --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:8000/v1 --openai.server_type vllm --openai.model_name MODEL \\
        --env.data_dir_to_save_evals runs/bfcl-eval
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from atroposlib.envkit.chat import completion_budget, transcript
from atroposlib.envkit.evaluation import report_eval
from atroposlib.envkit.rollouts import SamplingConfig, Trajectories
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.tally import Tally
from atroposlib.envkit.tool_calls import TOOLBOX, template_renders_tools
from atroposlib.envs.base import BaseEnv
from atroposlib.errors import ConfigError
from atroposlib.interop.bfcl import (
    NON_LIVE_AST,
    Answer,
    BfclChecker,
    BfclEntry,
    Verdict,
    build_pool,
    evaluate_entries,
    fixed_subsample,
)
from atroposlib.interop.bfcl.answering import ask_fc_mode, ask_prompt_mode
from atroposlib.interop.bfcl.pool import fits_within
from atroposlib.interop.bfcl.scores import SINGLE_TURN
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)
TRAIN_ANSWER_ROOM = 128
"""A training item's prompt leaves at least this many tokens for the answer (else it is left out)."""


class BfclConfig(SamplingConfig):
    categories: list[str] = Field(
        default_factory=lambda: list(NON_LIVE_AST),
        description="BFCL categories evaluate() scores (default: the non-live AST categories).",
    )
    mode: Literal["prompt", "fc"] = Field(
        "prompt",
        description="evaluate(): 'prompt' (the leaderboard's Prompt mode: call text) or 'fc' "
        "(its FC mode: tools through the managed server's Hermes parser).",
    )
    per_category: Optional[int] = Field(
        None, ge=1, description="evaluate(): a fixed subsample of N entries per category."
    )
    eval_seed: int = Field(0, description="Seed of the --env.per_category subsample.")
    max_answer_tokens: int = Field(256, ge=8, description="Token budget of one answer.")
    eval_concurrency: int = Field(16, ge=1, description="evaluate(): questions asked at once.")
    composed_parallel: int = Field(
        300, ge=0, description="Training items composed of 2-3 questions on one function."
    )
    composed_parallel_multiple: int = Field(
        300, ge=0, description="Training items composed of 2-3 questions on different functions."
    )
    synthetic: int = Field(
        0,
        ge=0,
        description="Training items written in the non-live categories' style from our own function "
        "templates (atroposlib.interop.bfcl.synthetic), added to the pool; 0: none.",
    )
    seed: int = Field(0, description="Seed of the composed items and of the training order.")
    partial_credit: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Training reward of an answer the checker rejects for what is in its calls (a "
        "name, a parameter, a value) although it is a list of as many calls as asked (BFCL's error is "
        "neither decoder_failed nor wrong_count). 0: the reward is the verdict alone (1 or 0).",
    )

    strict_partial_credit: bool = Field(
        False,
        description="partial_credit is not paid when BFCL's checker rejects a call for leaving out a "
        "required parameter or naming a wrong function (its missing_required and wrong_func_name "
        "errors): such an answer earns 0, as a malformed one does.",
    )

    format_credit: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Training reward of a rejected answer that BFCL's decoder reads as a list of calls "
        "(not decoder_failed) and that earns no more otherwise: a wrong count of calls, or a call "
        "whose partial credit strict_partial_credit withholds. 0: a malformed and a decodable wrong "
        "answer both earn what partial_credit gives them.",
    )

    part_credit: bool = Field(
        False,
        description="Training reward of a rejected answer to a composed item: at least the share of "
        "its parts the checker accepts one of its calls for, over the larger of the parts asked and "
        "the calls written. False: composed items are scored by the verdict (and partial_credit) alone.",
    )

    @field_validator("categories")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in SINGLE_TURN]
        if unknown or not value:
            raise ValueError(
                f"unknown BFCL categories {unknown or '(none given)'}; valid: {', '.join(SINGLE_TURN)}"
            )
        return value


OUTCOMES = ("valid", "malformed", "wrong count", "wrong call")
"""How a training answer ends (counted as ``train/outcome/<kind>``): accepted; no list of calls; too many
or too few calls; as many calls as asked, with a wrong name, parameter or value."""


def outcome(verdict: Verdict) -> str:
    """Which of ``OUTCOMES`` the official verdict is."""
    if verdict.valid:
        return "valid"
    if verdict.malformed:
        return "malformed"
    return "wrong call" if verdict.right_count else "wrong count"


def reward(
    verdict: Verdict,
    partial_credit: float,
    part_credit: bool = False,
    strict: bool = False,
    format_credit: float = 0.0,
) -> float:
    """1.0 when the official checker accepts the answer; ``partial_credit`` when it rejects a list of
    as many calls as asked for what is in them (BFCL's own error type says which), and with ``strict``
    not for a required parameter left out or a wrong function name; ``format_credit`` at least for any
    answer BFCL's decoder reads; with ``part_credit``, a composed item's share of accepted parts where
    that is more; else 0.0."""
    if verdict.valid:
        return 1.0
    paid = verdict.right_count and not (strict and verdict.incomplete_call)
    graded = partial_credit if paid else 0.0
    if not verdict.malformed:
        graded = max(graded, format_credit)
    return max(graded, verdict.part_share) if part_credit else graded


class BfclEnv(BaseEnv):
    name = "bfcl"
    env_config_cls = BfclConfig
    config: BfclConfig
    config_init = local_defaults(
        group_size=8, max_token_length=1280, batch_size=32, temperature=1.0, include_messages=True
    )

    async def setup(self) -> None:
        self.checker = BfclChecker.start()  # ConfigError (one line) when there is no checker
        self.tally = Tally(self.set_metric)
        for kind in OUTCOMES:
            self.set_metric(self.tally.metric_name("outcome", kind), 0)
        self.pool: list[BfclEntry] = []
        self.rng = random.Random(self.config.seed)

    def _load_pool(self) -> None:
        pool = build_pool(
            self.checker,
            fits=fits_within(self.tokenizer, self.config.max_token_length, TRAIN_ANSWER_ROOM),
            composed_parallel=self.config.composed_parallel,
            composed_parallel_multiple=self.config.composed_parallel_multiple,
            seed=self.config.seed,
            synthetic=self.config.synthetic,
        )
        if not pool.items:
            raise ConfigError(
                f"bfcl: no training item fits --env.max_token_length {self.config.max_token_length}"
            )
        self.pool = list(pool.items)
        logger.info(
            "bfcl: training pool of %d items %s; left out: %s",
            len(self.pool),
            pool.by_category(),
            pool.excluded or "nothing",
        )

    async def get_next_item(self) -> Item:
        if not self.pool:
            await asyncio.to_thread(self._load_pool)
        return self.rng.choice(self.pool)

    async def collect_trajectories(self, item: BfclEntry) -> Trajectories:
        messages = item.chat()
        budget = completion_budget(self.tokenizer, messages, self.config.max_token_length)
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            completion = await managed.chat_completion(
                messages=messages,
                n=self.config.group_size,
                temperature=self.config.temperature,
                max_tokens=min(budget, self.config.max_answer_tokens),
            )
            nodes = managed.get_state()["nodes"]
        answers = [c.message.content or "" for c in completion.choices]
        verdicts = await asyncio.to_thread(
            self.checker.check, [Answer(item.id, text=a) for a in answers]
        )
        group = self.group_builder()
        for answer, node, verdict in zip(answers, nodes, verdicts, strict=True):
            kind = outcome(verdict)
            self.tally.count(
                "outcome", kind, f"{item.id}: {verdict.reason}", quiet=kind != "malformed"
            )
            self.add_metric("train/valid", float(verdict.valid))
            if verdict.parts:
                self.add_metric("train/composed_part_share", verdict.part_share)
            group.add_node(
                node,
                reward(
                    verdict,
                    self.config.partial_credit,
                    self.config.part_credit,
                    self.config.strict_partial_credit,
                    self.config.format_credit,
                ),
                messages=transcript(messages, answer, verdict.reason),
                overrides={"bfcl_id": item.id, "category": item.category},
            )
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """The chosen categories, greedily, scored by the official checker (see the module docstring)."""
        start = time.time()
        cfg = self.config
        loaded = await asyncio.to_thread(self.checker.load, cfg.categories)
        entries = fixed_subsample(loaded, cfg.per_category, cfg.eval_seed)
        # a template that ignores tools= (SmolLM2's) gets them in a system prompt (``answering``)
        in_template = cfg.mode == "fc" and template_renders_tools(
            self.tokenizer, [TOOLBOX["calculator"]]
        )
        if cfg.mode == "fc":
            self.server.tool_parser = "hermes"

        async def ask(entry: BfclEntry) -> Any:
            budget = completion_budget(self.tokenizer, entry.chat(), cfg.max_token_length)
            tokens = min(budget, cfg.max_answer_tokens)
            if cfg.mode == "fc":
                return await ask_fc_mode(
                    self.server, self.tokenizer, entry, tokens, in_template, split="eval"
                )
            return await ask_prompt_mode(self.server, entry, tokens, split="eval")

        report = await evaluate_entries(
            entries, ask, self.checker, mode=cfg.mode, concurrency=cfg.eval_concurrency
        )
        logger.info("bfcl (%s mode):\n%s", cfg.mode, report.table())
        metrics = {f"eval/{c}": s.accuracy for c, s in report.by_category().items()}
        metrics.update({f"eval/{c}_se": s.se for c, s in report.by_category().items()})
        metrics.update({f"eval/{k}": s.accuracy for k, s in report.aggregates().items()})
        metrics["eval/malformed_share"] = report.malformed() / max(1, len(report.results))
        await report_eval(
            self,
            metrics,
            task_name=self.name,
            samples=[r.record() for r in report.results],
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": 0.0, "max_tokens": cfg.max_answer_tokens},
        )


if __name__ == "__main__":
    BfclEnv.cli()

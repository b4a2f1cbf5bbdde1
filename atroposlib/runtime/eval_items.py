"""Evaluating a list of items: a few at a time, skipping (and counting) the items that cannot be asked.

    results = await evaluate_items(env, self.test, self.score_one)

runs ``score_one(item)`` for every item, at most ``--env.max_eval_workers`` at once, and returns the
results of the items that could be evaluated, in order. An item that cannot be asked as it is, its
prompt longer than ``max_token_length`` (``PromptTooLong``, or an inference server's 400 saying the
prompt exceeds the model's context) is skipped: counted by reason, the first of each reason logged,
the others evaluated. Any other error ends the evaluation as before.

The count lives in the run's ``EvalTally`` (``RunContext.eval_tally``): the ``evaluate`` progress
line shows ``done/total``, ``metrics.json`` records it (``config_general.eval_items``) and the last
line of the run says how many items were evaluated and skipped. When every item is skipped there is
no result to report: ``RunFailed`` says so in one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Optional, TypeVar

from atroposlib.errors import InferenceRejected, PromptTooLong, RunFailed
from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.eval_tally import EvalTally

logger = logging.getLogger(__name__)

SKIP_PROMPT_TOO_LONG = "prompt longer than max_token_length"

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


def skip_reason(exc: BaseException) -> Optional[str]:
    """Why an item that raised ``exc`` is skipped rather than ending the evaluation (None: it is not)."""
    if isinstance(exc, PromptTooLong):
        return SKIP_PROMPT_TOO_LONG
    if (
        isinstance(exc, InferenceRejected)
        and exc.status_code == 400
        and "context length" in str(exc).lower()  # vLLM / OpenAI: "maximum context length is ..."
    ):
        return SKIP_PROMPT_TOO_LONG
    return None


async def evaluate_items(
    env: EnvRuntime,
    items: Sequence[ItemT],
    evaluate_one: Callable[[ItemT], Awaitable[ResultT]],
    *,
    workers: Optional[int] = None,
) -> list[ResultT]:
    """``evaluate_one(item)`` for each item (``workers`` at once, default ``max_eval_workers``);
    the results of the items evaluated, in order (see the module docstring)."""
    tally = env.context.eval_tally
    tally.total = (tally.total or 0) + len(items)
    slots = asyncio.Semaphore(max(1, workers or env.config.max_eval_workers))
    skipped = object()

    async def one(item: ItemT) -> Any:
        async with slots:
            try:
                result = await evaluate_one(item)
            except Exception as e:  # noqa: BLE001 - skipped when the item cannot be asked, else raised
                reason = skip_reason(e)
                if reason is None:
                    raise
                if not tally.skipped[reason]:
                    logger.warning(
                        "evaluate: skipping an item (%s): %s; further ones are counted", reason, e
                    )
                tally.skipped[reason] += 1
                return skipped
            tally.done += 1
            return result

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        results = await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    kept: list[ResultT] = [r for r in results if r is not skipped]
    if items and not kept:
        hint = "; raise --env.max_token_length" if SKIP_PROMPT_TOO_LONG in tally.skipped else ""
        raise RunFailed(f"evaluate: no item could be evaluated: {tally.summary()}{hint}")
    return kept


__all__ = ["SKIP_PROMPT_TOO_LONG", "EvalTally", "evaluate_items", "skip_reason"]

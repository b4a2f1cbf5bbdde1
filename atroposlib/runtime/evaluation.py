"""The ``evaluate`` subcommand, and what ``BaseEnv.evaluate_log`` writes.

If an env's ``evaluate()`` only appends ``(name, value)`` pairs to ``self.eval_metrics`` and never
calls ``evaluate_log``, the runner writes those. Eval requests use the servers' eval limits
(``split="eval"``, ``num_requests_for_eval``); ``max_eval_workers`` is the env's own eval concurrency
setting. The files (``metrics.json``, ``samples.jsonl``) are written by ``eval_results``.

``config_general.model_name`` is the model the server's answers name (what was really served),
else the configured one; ``generation_parameters.max_new_tokens`` is the ``max_tokens`` the eval
requests asked for (a list when they differed), else ``max_token_length``.

``evaluate`` fails with one line (``RunFailed``, exit 1) when the env defines no ``evaluate()``,
when ``evaluate()`` raises, or when it reports no metrics. While it runs, a line every
``--env.progress_interval`` seconds says how many inference requests have been answered and, for
an env that evaluates through ``eval_items.evaluate_items``, how many of how many items are done.
Such an env's items that cannot be asked (a prompt longer than ``max_token_length``) are skipped and
counted: ``metrics.json`` records the tally (``config_general.eval_items``) and the run's last line
says how many items were evaluated and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional, Union

from atroposlib.errors import AtroposError, RunFailed
from atroposlib.runtime.atropos_hooks import overrides
from atroposlib.runtime.context import EnvRuntime
from atroposlib.runtime.eval_results import EvalRun, write_eval_files
from atroposlib.runtime.eval_tally import EvalTally
from atroposlib.runtime.failures import one_line

logger = logging.getLogger(__name__)


def _model_name(env: EnvRuntime) -> Optional[str]:
    servers = list(env.server.servers)
    served = next((s.served_model for s in servers if getattr(s, "served_model", None)), None)
    if served:
        return served
    name: Optional[str] = getattr(env.config, "model_name", None)
    if name is None and servers:
        name = getattr(getattr(servers[0], "config", None), "model_name", None)
    return name


def _max_new_tokens(env: EnvRuntime) -> Union[int, list[int]]:
    used: set[int] = set()
    for s in env.server.servers:
        used |= set(getattr(s, "eval_max_tokens", set()))
    if not used:
        return env.config.max_token_length
    return next(iter(used)) if len(used) == 1 else sorted(used)


def write_eval_results(env: EnvRuntime, run: EvalRun, verbose: bool = True) -> Optional[Path]:
    """``BaseEnv.evaluate_log``: the env's results to ``data_dir_to_save_evals``, named after the env
    unless ``run.task`` names them, with the model and generation parameters its servers used."""
    env.context.eval_logged = True
    run = replace(
        run,
        task=run.task or f"{env.name or type(env).__name__}_eval",
        model_name=run.model_name or _model_name(env),
        generation_parameters={
            "max_new_tokens": _max_new_tokens(env),
            **(run.generation_parameters or {}),
        },
    )
    return write_eval_files(
        env.config.data_dir_to_save_evals,
        run,
        verbose=verbose,
        missing_dir_hint="data_dir_to_save_evals is not set",
        items=env.context.eval_tally.as_json()
        if env.context.eval_tally.total is not None
        else None,
    )


async def _progress(env: EnvRuntime, start: float, every: float) -> None:
    """Every ``every`` seconds: how long, and how many inference requests were answered."""
    while True:
        await asyncio.sleep(every)
        servers = list(env.server.servers)
        answered = sum(getattr(s, "answered", 0) for s in servers)
        failed = sum(getattr(s, "failures", 0) for s in servers)
        items = env.context.eval_tally.progress()
        logger.info(
            "evaluate: %.0fs, %s%d inference request(s) answered%s",
            time.time() - start,
            f"{items}, " if items else "",
            answered,
            f", {failed} failed attempt(s)" if failed else "",
        )


async def run_evaluate(env: EnvRuntime) -> None:
    """Set the env up, run its ``evaluate()``, make sure results were written; ``RunFailed`` when
    there is no evaluation, it raised, or it reported nothing."""
    ctx = env.context
    ctx.eval_logged = False
    ctx.eval_tally = EvalTally()
    name = type(env).__name__
    if not overrides(env, "evaluate"):
        await env.server.close()
        raise RunFailed(f"{name} defines no evaluate(): it has no evaluation to run")
    ticker: Optional[asyncio.Task[None]] = None
    try:
        await env.setup()
        start = time.time()
        every = float(env.config.progress_interval or 0)
        if every > 0:
            ticker = asyncio.create_task(_progress(env, start, every))
        try:
            await env.evaluate()
        except AtroposError:
            raise
        except Exception as e:  # noqa: BLE001 - one line for the user; the traceback at DEBUG
            logger.debug("evaluate() raised", exc_info=True)
            raise RunFailed(f"{name}.evaluate() failed: {one_line(e)}") from None
        if not ctx.eval_logged:
            metrics = dict(ctx.eval_metrics)
            if not metrics:
                raise RunFailed(
                    f"{name}.evaluate() reported no metrics: call self.evaluate_log(metrics=...) "
                    "or append (name, value) pairs to self.eval_metrics"
                )
            write_eval_results(env, EvalRun(metrics, start_time=start, end_time=time.time()))
        if ctx.eval_tally.total is not None:
            log = logger.warning if ctx.eval_tally.skipped else logger.info
            log("evaluate: %s", ctx.eval_tally.summary())
    finally:
        if ticker is not None:
            ticker.cancel()
        ctx.close_scorer()
        await env.server.close()


__all__ = ["run_evaluate", "write_eval_results"]

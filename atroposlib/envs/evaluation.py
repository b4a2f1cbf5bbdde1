"""The ``evaluate`` subcommand and ``BaseEnv.evaluate_log``: metrics.json, samples.jsonl, a table.

``metrics.json`` has Atropos's (lighteval-like) layout: ``config_general`` (model, duration,
generation parameters) and ``results`` (``atropos|<task>|0`` and ``all``). If an env's ``evaluate()``
only appends ``(name, value)`` pairs to ``self.eval_metrics`` and never calls ``evaluate_log``, the
runner writes those. Eval requests use the servers' eval limits (``split="eval"``,
``num_requests_for_eval``); ``max_eval_workers`` is the env's own eval concurrency setting.

``config_general.model_name`` is the model the server's answers name (what was really served),
else the configured one; ``generation_parameters.max_new_tokens`` is the ``max_tokens`` the eval
requests asked for (a list when they differed), else ``max_token_length``. Values are written as
JSON numbers/booleans (numpy scalars included), never their ``str()``.

``evaluate`` fails with one line (``RunFailed``, exit 1) when the env defines no ``evaluate()``,
when ``evaluate()`` raises, or when it reports no metrics. While it runs, a line every
``--env.progress_interval`` seconds says how many inference requests have been answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any, Optional

from atroposlib.envs.context import EnvRuntime, context_of
from atroposlib.envs.failures import one_line
from atroposlib.errors import AtroposError, RunFailed

logger = logging.getLogger(__name__)


def to_json_value(o: Any) -> Any:
    """``json.dumps`` fallback: numpy scalars/arrays as numbers/booleans/lists, else ``str``."""
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def format_table(task: str, metrics: dict[str, Any], seconds: Optional[float] = None) -> str:
    rows = [(k, f"{v:.4f}" if isinstance(v, float) else str(v)) for k, v in metrics.items()]
    w1 = max([len("metric")] + [len(k) for k, _ in rows])
    w2 = max([len("value")] + [len(v) for _, v in rows])
    head = f"{task}" + (f"  ({seconds:.1f}s)" if seconds is not None else "")
    lines = [
        head,
        f"| {'metric'.ljust(w1)} | {'value'.rjust(w2)} |",
        f"|{'-' * (w1 + 2)}|{'-' * (w2 + 2)}|",
    ]
    lines += [f"| {k.ljust(w1)} | {v.rjust(w2)} |" for k, v in rows]
    return "\n".join(lines)


def _model_name(env: EnvRuntime) -> Optional[str]:
    servers = list(getattr(env.server, "servers", []))
    served = next((s.served_model for s in servers if getattr(s, "served_model", None)), None)
    if served:
        return served
    name = getattr(env.config, "model_name", None)
    if name is None and servers:
        name = getattr(getattr(servers[0], "config", None), "model_name", None)
    return name


def _max_new_tokens(env: EnvRuntime) -> Any:
    used: set[int] = set()
    for s in getattr(env.server, "servers", []):
        used |= set(getattr(s, "eval_max_tokens", set()))
    if not used:
        return env.config.max_token_length
    return next(iter(used)) if len(used) == 1 else sorted(used)


def write_eval_results(
    env: EnvRuntime,
    metrics: dict[str, Any],
    *,
    task_name: Optional[str] = None,
    model_name: Optional[str] = None,
    start_time: Optional[float] = None,
    end_time: Optional[float] = None,
    generation_parameters: Optional[dict] = None,
    samples: Optional[list[dict]] = None,
    verbose: bool = True,
) -> Optional[Path]:
    task = task_name or f"{env.name or type(env).__name__}_eval"
    end = end_time or time.time()
    start = start_time or end
    if verbose:
        print(format_table(task, metrics, end - start), flush=True)
    context_of(env).eval_logged = True
    if env.config.data_dir_to_save_evals is None:
        logger.warning("data_dir_to_save_evals is not set; evaluation results are not saved")
        return None
    out = Path(env.config.data_dir_to_save_evals)
    out.mkdir(parents=True, exist_ok=True)
    params = {"max_new_tokens": _max_new_tokens(env), **(generation_parameters or {})}
    result = {
        "config_general": {
            "model_name": model_name or _model_name(env),
            "total_evaluation_time_seconds": str(end - start),
            "generation_parameters": params,
        },
        "results": {f"atropos|{task}|0": metrics, "all": metrics},
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2, default=to_json_value))
    if samples:
        with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
            for s in samples:
                f.write(json.dumps(s, default=to_json_value, ensure_ascii=False) + "\n")
    logger.info("evaluation results saved to %s", out)
    return out / "metrics.json"


def _defines_evaluate(env: EnvRuntime) -> bool:
    from atroposlib.envs.base import BaseEnv

    return getattr(type(env), "evaluate", None) is not BaseEnv.evaluate


async def _progress(env: EnvRuntime, start: float, every: float) -> None:
    """Every ``every`` seconds: how long, and how many inference requests were answered."""
    while True:
        await asyncio.sleep(every)
        servers = list(getattr(env.server, "servers", []))
        answered = sum(getattr(s, "answered", 0) for s in servers)
        failed = sum(getattr(s, "failures", 0) for s in servers)
        logger.info(
            "evaluate: %.0fs, %d inference request(s) answered%s",
            time.time() - start,
            answered,
            f", {failed} failed attempt(s)" if failed else "",
        )


async def run_evaluate(env: EnvRuntime) -> None:
    """Set the env up, run its ``evaluate()``, make sure results were written; ``RunFailed`` when
    there is no evaluation, it raised, or it reported nothing."""
    context_of(env).eval_logged = False
    name = type(env).__name__
    if not _defines_evaluate(env):
        await env.server.close()
        raise RunFailed(f"{name} defines no evaluate(): it has no evaluation to run")
    ticker: Optional[asyncio.Task] = None
    try:
        await env.setup()
        start = time.time()
        every = float(getattr(env.config, "progress_interval", 15.0) or 0)
        if every > 0:
            ticker = asyncio.create_task(_progress(env, start, every))
        try:
            await env.evaluate()
        except AtroposError:
            raise
        except Exception as e:  # noqa: BLE001 - one line for the user; the traceback at DEBUG
            logger.debug("evaluate() raised", exc_info=True)
            raise RunFailed(f"{name}.evaluate() failed: {one_line(e)}") from None
        if not context_of(env).eval_logged:
            metrics = {k: v for k, v in (env.eval_metrics or [])}
            if not metrics:
                raise RunFailed(
                    f"{name}.evaluate() reported no metrics: call self.evaluate_log(metrics=...) "
                    "or append (name, value) pairs to self.eval_metrics"
                )
            write_eval_results(env, metrics, start_time=start, end_time=time.time())
    finally:
        if ticker is not None:
            ticker.cancel()
        await env.server.close()


__all__ = ["format_table", "run_evaluate", "to_json_value", "write_eval_results"]

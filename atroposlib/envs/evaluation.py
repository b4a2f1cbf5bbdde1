"""The ``evaluate`` subcommand and ``BaseEnv.evaluate_log``: metrics.json, samples.jsonl, a table.

``metrics.json`` has Atropos's (lighteval-like) layout: ``config_general`` (model, duration,
generation parameters) and ``results`` (``atropos|<task>|0`` and ``all``). If an env's ``evaluate()``
only appends ``(name, value)`` pairs to ``self.eval_metrics`` and never calls ``evaluate_log``, the
runner writes those. Eval requests use the servers' eval limits (``split="eval"``,
``num_requests_for_eval``); ``max_eval_workers`` is the env's own eval concurrency setting.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Optional

logger = logging.getLogger(__name__)


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


def _model_name(env: Any) -> Optional[str]:
    name = getattr(env.config, "model_name", None)
    if name is None and env.server.servers:
        name = getattr(getattr(env.server.servers[0], "config", None), "model_name", None)
    return name


def write_eval_results(
    env: Any,
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
    env._eval_logged = True
    if env.config.data_dir_to_save_evals is None:
        logger.warning("data_dir_to_save_evals is not set; evaluation results are not saved")
        return None
    out = Path(env.config.data_dir_to_save_evals)
    out.mkdir(parents=True, exist_ok=True)
    params = {"max_new_tokens": env.config.max_token_length, **(generation_parameters or {})}
    result = {
        "config_general": {
            "model_name": model_name or _model_name(env),
            "total_evaluation_time_seconds": str(end - start),
            "generation_parameters": params,
        },
        "results": {f"atropos|{task}|0": metrics, "all": metrics},
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2, default=str))
    if samples:
        with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
            for s in samples:
                f.write(json.dumps(s, default=str, ensure_ascii=False) + "\n")
    logger.info("evaluation results saved to %s", out)
    return out / "metrics.json"


async def run_evaluate(env: Any) -> None:
    """Set the env up, run its ``evaluate()``, make sure results were written."""
    env._eval_logged = False
    try:
        await env.setup()
        start = time.time()
        await env.evaluate()
        if not env._eval_logged:
            metrics = {k: v for k, v in (env.eval_metrics or [])}
            if not metrics:
                logger.warning(
                    "evaluate() reported no metrics (neither evaluate_log() nor self.eval_metrics)"
                )
            write_eval_results(env, metrics, start_time=start, end_time=time.time())
    finally:
        await env.server.close()


__all__ = ["format_table", "run_evaluate", "write_eval_results"]

"""The one writer of evaluation results: ``metrics.json``, ``samples.jsonl`` and the printed table.

``metrics.json`` has Atropos's (lighteval-like) layout: ``config_general`` (model, duration,
generation parameters, how the evaluation was run (``eval_settings``) and, when the env evaluated
through ``eval_items``, ``eval_items``: total, evaluated, skipped by reason) and ``results`` (``atropos|<task>|0`` and ``all``). Values are written as JSON
numbers/booleans/lists (numpy scalars and arrays included), never their ``str()``. Both kinds of
evaluation write an ``EvalRun`` through ``write_eval_files``: an env's ``evaluate_log`` / the
``evaluate`` subcommand (``evaluation``) and Atropos's stand-alone ``EvalBase``
(``atroposlib.envs.eval``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

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


def format_table(task: str, metrics: Mapping[str, Any], seconds: Optional[float] = None) -> str:
    """A markdown table of ``metrics`` under a ``task (Ns)`` heading."""
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


@dataclass(frozen=True)
class EvalRun:
    """What one evaluation produced: the fields of Atropos's ``evaluate_log``, in its order.

    ``task`` None lets ``BaseEnv.evaluate_log`` name it after the env; ``end_time`` None is now and
    ``start_time`` None the end (a duration of 0)."""

    metrics: Mapping[str, Any]
    task: Optional[str] = None
    model_name: Optional[str] = None
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    generation_parameters: Optional[Mapping[str, Any]] = None
    samples: Optional[Sequence[Any]] = None


def write_eval_files(
    out_dir: Optional[Union[str, Path]],
    run: EvalRun,
    *,
    verbose: bool = True,
    missing_dir_hint: str = "no results directory is set",
    items: Optional[Mapping[str, Any]] = None,
    settings: Optional[Mapping[str, Any]] = None,
) -> Optional[Path]:
    """Print the table (``verbose``), write ``out_dir/metrics.json`` and ``out_dir/samples.jsonl``;
    without ``out_dir`` only warn (``missing_dir_hint`` says which setting). Returns the metrics file."""
    task, metrics = str(run.task), run.metrics
    end = run.end_time if run.end_time is not None else time.time()
    start = run.start_time if run.start_time is not None else end
    if verbose:
        print(format_table(task, metrics, end - start), flush=True)
    if out_dir is None:
        logger.warning("%s; evaluation results are not saved", missing_dir_hint)
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "config_general": {
            "model_name": run.model_name,
            "total_evaluation_time_seconds": str(end - start),
            "generation_parameters": dict(run.generation_parameters or {}),
            **({"eval_items": dict(items)} if items is not None else {}),
            **({"eval_settings": dict(settings)} if settings is not None else {}),
        },
        "results": {f"atropos|{task}|0": dict(metrics), "all": dict(metrics)},
    }
    path = out / "metrics.json"
    path.write_text(json.dumps(result, indent=2, default=to_json_value))
    if run.samples:
        with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
            for s in run.samples:
                f.write(json.dumps(s, default=to_json_value, ensure_ascii=False) + "\n")
    logger.info("evaluation results saved to %s", out)
    return path


__all__ = ["EvalRun", "format_table", "to_json_value", "write_eval_files"]

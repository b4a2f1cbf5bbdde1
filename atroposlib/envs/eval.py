"""Stand-alone evaluations (Atropos's ``atroposlib.envs.eval``): ``EvalBase``, ``eval_runner``.

An eval is a class with ``setup_data()`` (the items) and ``async run_item(server, item)`` returning
``(metrics_dict, samples_list)``; calling the instance with a ``ServerManager`` runs every item
concurrently, averages each metric over the items, writes ``metrics.json`` / ``samples.jsonl`` to
``eval_dir`` (when given; the runtime's one writer, ``atroposlib.runtime.eval_results``) and returns
the averaged metrics. ``python my_eval.py --server-url URL --model-name M`` runs it through
``eval_runner``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from atroposlib.inference_clients.config import APIServerConfig
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.runtime.eval_results import EvalRun, write_eval_files
from atroposlib.runtime.eval_scores import pass_at_k  # Atropos's name lives here too

logger = logging.getLogger(__name__)


def evaluate_log(
    metrics: dict[str, Any],
    eval_dir: Optional[str] = None,
    task_name: Optional[str] = None,
    model_name: Optional[str] = None,
    start_time: Optional[float] = None,
    end_time: Optional[float] = None,
    generation_parameters: Optional[dict[str, Any]] = None,
    samples: Optional[Sequence[Any]] = None,
    verbose: bool = True,
) -> Optional[Path]:
    """Write ``eval_dir/metrics.json`` (lighteval-like layout, as ``BaseEnv.evaluate_log``) and
    ``eval_dir/samples.jsonl``; without ``eval_dir`` only warn. Returns the metrics file."""
    run = EvalRun(
        metrics, str(task_name), model_name, start_time, end_time, generation_parameters, samples
    )
    return _write(eval_dir, run, verbose)


def _write(eval_dir: Optional[str], run: EvalRun, verbose: bool) -> Optional[Path]:
    """``run`` through the one writer, saying where it went."""
    path = write_eval_files(eval_dir, run, verbose=verbose, missing_dir_hint="eval_dir is not set")
    if path is not None:
        print(f"Evaluation results saved to {path}", flush=True)
    return path


class EvalBase(ABC):
    """Base of a stand-alone eval; keyword arguments become attributes (``temperature``,
    ``top_p``, ``max_tokens``, ``eval_dir``, ``verbose``, anything the subclass reads)."""

    def __init__(self, pass_at_n: int = 1, pass_at_n_samples: int = 1, **kwargs: Any) -> None:
        self.pass_at_n = pass_at_n
        self.pass_at_n_samples = pass_at_n_samples
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.data = self.setup_data()

    def get_generation_params(self) -> dict[str, Any]:
        """Sampling parameters of every request; ``max_tokens`` only when set (Atropos sent -1,
        which real OpenAI-compatible servers reject)."""
        params: dict[str, Any] = {
            "temperature": getattr(self, "temperature", 0.0),
            "n": max(self.pass_at_n_samples, self.pass_at_n),
            "top_p": getattr(self, "top_p", 1.0),
        }
        max_tokens = getattr(self, "max_tokens", -1)
        if max_tokens is not None and max_tokens > 0:
            params["max_tokens"] = max_tokens
        return params

    async def chat_completion(self, server: Any, messages: list[dict[str, Any]]) -> Any:
        return await server.chat_completion(messages=messages, **self.get_generation_params())

    @abstractmethod
    def setup_data(self) -> list:
        """The items to evaluate."""

    @abstractmethod
    async def run_item(self, server: ServerManager, data_item: Any) -> tuple[dict, list]:
        """``(metrics, samples)`` for one item."""

    def task_name(self) -> str:
        name = f"{type(self).__name__}@{self.pass_at_n}"
        if self.pass_at_n != self.pass_at_n_samples:
            name += f":{self.pass_at_n_samples}"
        return name

    async def __call__(self, server_manager: ServerManager) -> dict[str, float]:
        if not self.data:
            raise ValueError(f"{type(self).__name__}.setup_data() returned no items")
        start = time.time()
        results = await asyncio.gather(*(self.run_item(server_manager, d) for d in self.data))
        end = time.time()
        per_item = [r[0] for r in results]
        metrics = {k: sum(m[k] for m in per_item) / len(per_item) for k in per_item[0]}
        servers = getattr(server_manager, "servers", None) or []
        model = (
            getattr(getattr(servers[0], "config", None), "model_name", None) if servers else None
        )
        samples = [r[1] for r in results]
        params = self.get_generation_params()
        run = EvalRun(metrics, self.task_name(), model, start, end, params, samples)
        _write(getattr(self, "eval_dir", None), run, getattr(self, "verbose", True))
        return metrics


async def eval_runner(eval_env: EvalBase, argv: Optional[Sequence[str]] = None) -> dict[str, float]:
    """Run ``eval_env`` against ``--server-url`` (an OpenAI-compatible ``.../v1`` URL)."""
    parser = argparse.ArgumentParser(description=f"Run the {type(eval_env).__name__} eval")
    parser.add_argument("--server-url", default="http://localhost:8000/v1")
    parser.add_argument("--model-name", default="default")
    parser.add_argument("--server-type", default="openai", choices=["openai", "vllm", "sglang"])
    parser.add_argument("--api-key", default="x")
    args = parser.parse_args(argv)
    manager = ServerManager(
        configs=[
            APIServerConfig(
                api_key=args.api_key,
                base_url=args.server_url,
                model_name=args.model_name,
                server_type=args.server_type,
                health_check=False,
            )
        ]
    )
    try:
        return await eval_env(manager)
    finally:
        await manager.close()


__all__ = ["EvalBase", "eval_runner", "evaluate_log", "pass_at_k"]

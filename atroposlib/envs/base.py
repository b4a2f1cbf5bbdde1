"""The ``BaseEnv`` contract (Atropos-compatible). Subclass it, implement a few hooks, call ``cli()``.

Hooks an environment implements::

    class MyEnv(BaseEnv):
        name = "my_env"
        @classmethod
        def config_init(cls): return BaseEnvConfig(...), [APIServerConfig(...)]
        async def setup(self): ...                      # load data
        async def get_next_item(self): ...              # next prompt/item (None: nothing now)
        async def collect_trajectories(self, item):     # -> (ScoredDataGroup | list | None, backlog)
        # or: async def collect_trajectory(self, item)  # -> (ScoredDataItem | None, backlog), x group_size
        async def evaluate(self, *a, **kw): ...         # optional
    if __name__ == "__main__":
        MyEnv.cli()

The machinery lives in collaborators: ``runner`` (serve loop, worker pool, spool), ``process`` and
``evaluation`` (the other subcommands), ``sending`` (filter/validate/stamp groups), ``metrics_logger``
(wandb or null), ``checkpoint``, ``server_handling`` (inference), ``config_loader`` (CLI).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, Optional, Union

from atroposlib.envs import checkpoint
from atroposlib.envs.atropos_hooks import AtroposHooks
from atroposlib.envs.config import BaseEnvConfig, EvalHandlingEnum
from atroposlib.envs.context import MetricsSink, OnContext, RunContext, context_of
from atroposlib.envs.groups import GroupBuilder, group_from_items
from atroposlib.envs.metrics_logger import NullMetricsLogger
from atroposlib.envs.sending import GroupSink, JsonlGroupWriter, NullSink, prepare_groups
from atroposlib.envs.server_handling.backends import APIServer
from atroposlib.envs.server_handling.server_manager import (
    APIServerConfig,
    ServerBaseline,
    ServerManager,
)
from atroposlib.type_definitions import Item, Message, ScoredDataGroup, ScoredDataItem
from atroposlib.utils.tokenizer_loading import load_tokenizer

logger = logging.getLogger(__name__)


class BaseEnv(AtroposHooks):
    """An RL environment: produces scored groups of rollouts for the trainer."""

    name: Optional[str] = None
    env_config_cls: type = BaseEnvConfig
    server_cls: Optional[type] = None

    context: RunContext
    # Atropos's attribute names for run-time state: properties onto ``self.context``
    env_id: Optional[int] = OnContext()  # type: ignore[assignment]
    curr_step: int = OnContext()  # type: ignore[assignment]
    status_dict: dict[str, Any] = OnContext()  # type: ignore[assignment]
    max_token_len: int = OnContext()  # type: ignore[assignment]
    wandb_prepend: Optional[str] = OnContext()  # type: ignore[assignment]
    checkpoint_dir: str = OnContext()  # type: ignore[assignment]
    checkpoint_interval: int = OnContext()  # type: ignore[assignment]
    process_mode: bool = OnContext()  # type: ignore[assignment]
    n_groups_to_process: Optional[int] = OnContext()  # type: ignore[assignment]
    group_size_to_process: Optional[int] = OnContext()  # type: ignore[assignment]
    group_sink: GroupSink = OnContext()  # type: ignore[assignment]
    metrics_logger: MetricsSink = OnContext()  # type: ignore[assignment]
    drop_counts: Counter = OnContext()  # type: ignore[assignment]

    def __init__(
        self,
        config: BaseEnvConfig,
        server_configs: Union[ServerBaseline, APIServerConfig, list[APIServerConfig]],
        slurm: bool = False,
        testing: bool = False,
    ) -> None:
        self.config = config
        self.server = ServerManager(
            server_configs,
            server_class=self.server_cls,
            slurm=slurm,
            testing=testing,
            unavailable_wait=config.unreachable_timeout,
        )
        self.server.set_reasoning(config.thinking_mode, config.reasoning_effort)
        self.tokenizer = load_tokenizer(config.tokenizer_name)
        # what the runtime assigns at run time lives here, not in the config (see context.py)
        ctx = context_of(self)
        ctx.metrics_logger, ctx.group_sink = NullMetricsLogger(), NullSink()
        self.backlog: list[Item] = []
        self.workers: set = (
            set()
        )  # Atropos attribute names some envs read; the runner owns the real pool
        self.eval_workers: set = set()
        self.eval_metrics: list[tuple[str, Any]] = []
        self.rollouts_for_wandb: list[list[tuple[str, float]]] = []
        self.completion_lengths: list[int] = []
        self.items_sent_this_step = 0
        self.jsonl_writer: Optional[JsonlGroupWriter] = None
        if config.data_path_to_save_groups is not None:
            self.jsonl_writer = JsonlGroupWriter(config.data_path_to_save_groups)
            self.context.groups_path = str(self.jsonl_writer.path)
        n_servers = len(self.server.servers)
        self.max_num_workers = (
            config.max_num_workers
            if config.max_num_workers > 0
            else config.max_num_workers_per_node * n_servers
        )

    # --- configuration ---------------------------------------------------------------------
    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, Union[ServerBaseline, list[APIServerConfig]]]:
        """Default configs of this env; the CLI layers YAML and flags on top."""
        return cls.env_config_cls(), ServerBaseline()

    @property
    def derived_batch_size(self) -> int:
        """This env's share of a batch given the API's unallocated fraction and min_batch_allocation."""
        batch_size = self.context.effective_batch_size(self.config)
        if not self.status_dict or batch_size == -1:
            return batch_size
        fraction = float(self.status_dict.get("unallocated_fraction", 1.0))
        if self.config.min_batch_allocation is not None:
            fraction += self.config.min_batch_allocation
        return int(batch_size * fraction)

    # --- metrics ---------------------------------------------------------------------------
    def add_metric(self, name: str, value: float) -> None:
        """Report one value of ``name``; the next ``wandb_log`` logs the mean of the values since
        the last one (e.g. ``self.add_metric("train/percent_correct", 1.0)`` per rollout)."""
        self.context.metrics.add(name, value)

    def set_metric(self, name: str, value: Any) -> None:
        """Set a value (a counter, a gauge) that every following ``wandb_log`` logs as it is."""
        self.context.metrics.gauges[name] = value

    # --- hooks -----------------------------------------------------------------------------
    async def setup(self) -> None:
        """Load datasets and state. Called once before anything else."""

    async def get_next_item(self) -> Item:
        raise NotImplementedError(f"{type(self).__name__} must implement get_next_item()")

    async def collect_trajectory(
        self, item: Item
    ) -> tuple[Optional[Union[ScoredDataItem, Any]], list[Item]]:
        raise NotImplementedError(
            f"{type(self).__name__} must implement collect_trajectories(item) or collect_trajectory(item)"
        )

    async def collect_trajectories(
        self, item: Item
    ) -> tuple[Union[Optional[ScoredDataGroup], list[Optional[ScoredDataGroup]]], list[Item]]:
        """Default: ``group_size`` concurrent ``collect_trajectory`` calls, combined into one group."""
        results = await asyncio.gather(
            *[self.collect_trajectory(item) for _ in range(self.config.group_size)]
        )
        backlog: list[Item] = []
        items = []
        for scored, more in results:
            if scored is not None and not isinstance(scored, dict):
                raise TypeError("collect_trajectory must return (ScoredDataItem | None, backlog)")
            items.append(scored)
            backlog.extend(more or [])
        return group_from_items(items), backlog

    async def postprocess_histories(
        self, trajectories: Union[Optional[ScoredDataGroup], list[Optional[ScoredDataGroup]]]
    ) -> Union[Optional[ScoredDataGroup], list[Optional[ScoredDataGroup]]]:
        """Optional last pass over collected groups (e.g. add advantages)."""
        return trajectories

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Run the env's evaluation; called every ``steps_per_eval`` trainer steps and by ``evaluate``."""
        logger.info("%s defines no evaluate(); nothing to evaluate", type(self).__name__)

    async def cleanup(self) -> None:
        """Optional: called after every handled item."""

    # --- helpers for envs ------------------------------------------------------------------
    def group_builder(self, **kwargs: Any) -> GroupBuilder:
        """A ``GroupBuilder`` for one item's group (see ``atroposlib.envs.groups``)."""
        return GroupBuilder(**kwargs)

    def save_checkpoint(self, step: int, data: Optional[dict[str, Any]] = None) -> None:
        """Persist ``data`` (JSON) for ``step``; subclasses add their state and call super()."""
        checkpoint.save(self.checkpoint_dir, self.wandb_prepend or self.name or "env", step, data)

    def load_checkpoint(self) -> None:
        """Restore attributes saved for ``curr_step`` (called on resume)."""
        for key, value in checkpoint.load(
            self.checkpoint_dir, self.wandb_prepend or self.name or "env", self.curr_step
        ).items():
            setattr(self, key, value)

    async def add_rollouts_for_wandb(self, scored_data: ScoredDataGroup, item: Item = None) -> None:
        keep = self.config.num_rollouts_per_group_for_logging
        keep = len(scored_data["tokens"]) if keep == -1 else min(keep, len(scored_data["tokens"]))
        self.rollouts_for_wandb.append(
            [
                (self.tokenizer.decode(scored_data["tokens"][i]), scored_data["scores"][i])
                for i in range(keep)
            ]
        )
        while len(self.rollouts_for_wandb) > self.config.num_rollouts_to_keep:
            self.rollouts_for_wandb.pop(0)

    async def create_rollout_table(self, wandb_metrics: dict[str, Any]) -> dict[str, Any]:
        rows = [tuple(row) for group in self.rollouts_for_wandb for row in group]
        width = max((len(r) for r in rows), default=2)
        columns = ["text", "score"] + [f"extra_{i}" for i in range(2, width)]
        rows = [r + (None,) * (width - len(r)) for r in rows]
        table = self.metrics_logger.table(columns, rows) if rows else None
        if table is not None:
            wandb_metrics["train/rollouts"] = table
        return wandb_metrics

    def perf_stats(self, metrics_dict: dict[str, Any]) -> dict[str, Any]:
        """Atropos hook for performance metrics; the runner logs its own counters, so this adds none."""
        return metrics_dict

    async def wandb_log(self, wandb_metrics: Optional[dict[str, Any]] = None) -> None:
        """Log metrics (envs add theirs and call super())."""
        metrics = self.context.metrics.drain()
        metrics.update(dict(self.eval_metrics))  # what evaluate() left (Atropos's convention)
        self.eval_metrics = []
        metrics.update(wandb_metrics or {})
        if self.completion_lengths:
            metrics["train/completion_lengths"] = sum(self.completion_lengths) / len(
                self.completion_lengths
            )
            metrics["train/completion_lengths_max"] = max(self.completion_lengths)
        for reason, count in self.drop_counts.items():
            metrics[f"train/groups_dropped_{reason}"] = count
        metrics = await self.create_rollout_table(metrics)
        metrics.update(await self.server.wandb_metrics())
        self.rollouts_for_wandb, self.completion_lengths = [], []
        if self.wandb_prepend:
            metrics = {f"{self.wandb_prepend}_{k}": v for k, v in metrics.items()}
        self.metrics_logger.log(metrics, step=self.curr_step)

    async def evaluate_log(
        self,
        metrics: dict[str, Any],
        task_name: Optional[str] = None,
        model_name: Optional[str] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
        generation_parameters: Optional[dict] = None,
        samples: Optional[list[dict]] = None,
        verbose: bool = True,
    ) -> None:
        """Write ``metrics.json`` (+ ``samples.jsonl``) to ``data_dir_to_save_evals``, print a table."""
        from atroposlib.envs.evaluation import write_eval_results

        write_eval_results(
            self,
            metrics,
            task_name=task_name,
            model_name=model_name,
            start_time=start_time,
            end_time=end_time or time.time(),
            generation_parameters=generation_parameters,
            samples=samples,
            verbose=verbose,
        )

    async def handle_send_to_api(
        self,
        scored_data: Union[ScoredDataGroup, list[ScoredDataGroup]],
        item: Item = None,
        do_send_to_api: bool = True,
        abort_on_any_max_length_exceeded: bool = True,
    ) -> list[dict[str, Any]]:
        """Filter, validate and stamp groups, save them to JSONL if configured, hand them to the sink."""
        groups = prepare_groups(
            self, scored_data, abort_on_any_max_length_exceeded, self.drop_counts
        )
        for group in groups:
            self.completion_lengths.extend(
                sum(1 for m in mask if m != -100) for mask in group["masks"]
            )
            await self.add_rollouts_for_wandb(group, item)
            if self.jsonl_writer is not None:
                self.jsonl_writer.write(group)
            if do_send_to_api:
                await self.group_sink.put(group)
        self.items_sent_this_step += len(groups)
        return groups

    # --- subcommands -----------------------------------------------------------------------
    async def env_manager(self) -> None:
        """``serve``: register with the API and keep its queue fed until ``total_steps``."""
        from atroposlib.envs.runner import ServeRunner

        await ServeRunner(self).run()

    async def process_manager(self, n_groups: Optional[int] = None) -> None:
        """``process``: make ``total_steps`` groups locally (JSONL + HTML report), no API."""
        from atroposlib.envs.process import ProcessRunner

        await ProcessRunner(self, n_groups=n_groups).run()

    async def _run_evaluate(self) -> None:
        from atroposlib.envs.evaluation import run_evaluate

        await run_evaluate(self)

    @classmethod
    def cli(cls) -> None:
        """``python my_env.py serve|process|evaluate [--config F] [--env.X V] [--openai.X V]``."""
        from atroposlib.envs.cli import main

        main(cls)


__all__ = [
    "APIServer",
    "APIServerConfig",
    "BaseEnv",
    "BaseEnvConfig",
    "EvalHandlingEnum",
    "GroupBuilder",
    "Item",
    "Message",
    "ScoredDataGroup",
    "ScoredDataItem",
    "ServerBaseline",
    "ServerManager",
    "load_tokenizer",
]

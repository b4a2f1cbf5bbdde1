"""ATROPOS COMPATIBILITY: the ``BaseEnv`` names Atropos env files read, call or override.

Nothing here is part of the env contract (``base.BaseEnv`` shows that); these names exist so that env
files written for Atropos keep working unchanged. ``dir()`` and ``help()`` of an env leave them out
(``surface``: this layer is marked ``_hidden_from_dir``), so a new author sees the contract; they
still resolve, take assignments, can be overridden and reached with ``super()``, and mypy types
them. This docstring lists every one of them (``tests/envs/test_surface.py`` checks it). Each
delegates to ``atroposlib.runtime``:

* run-time attributes are properties onto the env's ``RunContext`` (``OnContext``), so
  ``self.curr_step = 3`` in an env file writes the context the runtime reads: ``env_id``,
  ``curr_step``, ``status_dict``, ``max_token_len``, ``wandb_prepend``, ``checkpoint_dir``,
  ``checkpoint_interval``, ``process_mode``, ``n_groups_to_process``, ``group_size_to_process``,
  ``group_sink``, ``jsonl_writer``, ``metrics_logger``, ``drop_counts``, ``backlog``,
  ``items_sent_this_step``, ``completion_lengths``, ``rollouts_for_wandb``, ``eval_metrics``; and
  ``derived_batch_size`` (read-only: this env's share of a batch);
* Atropos's object attributes ``workers`` / ``eval_workers`` (empty: the serve runner owns the real
  pools), ``max_num_workers`` (the runtime's concurrency limit) and the class attribute
  ``server_cls`` (the ``APIServer`` class of ``self.server``; None: by ``server_type``);
* ``handle_send_to_api`` -> ``runtime.sending.send_groups``; ``wandb_log`` /
  ``add_rollouts_for_wandb`` / ``create_rollout_table`` -> ``runtime.step_metrics`` (these four are
  ``default_hook``s: the runtime calls its own implementation and goes through the env only when the
  env file overrides one; envs report metrics with ``add_metric`` / ``set_metric``);
  ``save_checkpoint`` / ``load_checkpoint`` -> ``runtime.checkpoint``; ``evaluate_log`` ->
  ``runtime.evaluation``; ``perf_stats`` adds nothing;
* ``env_manager`` / ``process_manager`` -> the ``serve`` / ``process`` subcommands
  (``runtime.runner``, ``runtime.process``; ``BaseEnv.cli`` is the command line);
* the loop hooks ``get_server_info``, ``env_step_checks``, ``add_train_workers`` are
  ``default_hook``s: the serve runner calls an env's own version only when the env overrides one
  (``runtime.atropos_hooks``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any, Generic, Optional, TypeVar, overload

from atroposlib.envs.surface import EnvMeta
from atroposlib.groups import Groups
from atroposlib.inference_clients.backend import APIServer
from atroposlib.runtime import checkpoint
from atroposlib.runtime.atropos_hooks import default_hook, fill_workers, read_server_info
from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.runtime.context import EnvRuntime, Rollout, RunContext
from atroposlib.runtime.eval_results import EvalRun
from atroposlib.runtime.evaluation import write_eval_results
from atroposlib.runtime.metrics_logger import MetricsSink
from atroposlib.runtime.process import process
from atroposlib.runtime.runner import serve
from atroposlib.runtime.sending import send_groups
from atroposlib.runtime.sinks import GroupSink, JsonlGroupWriter
from atroposlib.runtime.step_metrics import keep_rollouts, log_step_metrics, rollout_table
from atroposlib.type_definitions import Item, ScoredDataGroup

T = TypeVar("T")


def context_of(env: object) -> RunContext:
    """``env.context``, made on first use (an env file may assign ``self.curr_step`` before calling
    ``BaseEnv.__init__``)."""
    ctx = env.__dict__.get("context")
    if ctx is None:
        ctx = env.__dict__["context"] = RunContext()
    return ctx


class OnContext(Generic[T]):
    """A ``BaseEnv`` attribute that lives on its ``RunContext`` under the same name, so Atropos env
    files keep reading and assigning ``self.curr_step``, ``self.env_id``, ... as before."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: Optional[type] = None) -> OnContext[T]: ...

    @overload
    def __get__(self, obj: object, objtype: Optional[type] = None) -> T: ...

    def __get__(self, obj: Optional[object], objtype: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(context_of(obj), self.name)

    def __set__(self, obj: object, value: T) -> None:
        setattr(context_of(obj), self.name, value)


class AtroposCompat(metaclass=EnvMeta):
    """Mixed into ``BaseEnv``: Atropos's names (see the module docstring), left out of ``dir()``."""

    _hidden_from_dir = True  # surface.HIDDEN_MARK

    server_cls: Optional[type[APIServer]] = None
    # Atropos's object attributes (set by ``_init_atropos_attributes``)
    workers: set[asyncio.Task[None]]
    eval_workers: set[asyncio.Task[None]]
    max_num_workers: int

    # run-time state under Atropos's attribute names: properties onto ``self.context``
    env_id: OnContext[Optional[int]] = OnContext()
    curr_step: OnContext[int] = OnContext()
    status_dict: OnContext[dict[str, Any]] = OnContext()
    max_token_len: OnContext[int] = OnContext()
    wandb_prepend: OnContext[Optional[str]] = OnContext()
    checkpoint_dir: OnContext[str] = OnContext()
    checkpoint_interval: OnContext[int] = OnContext()
    process_mode: OnContext[bool] = OnContext()
    n_groups_to_process: OnContext[Optional[int]] = OnContext()
    group_size_to_process: OnContext[Optional[int]] = OnContext()
    group_sink: OnContext[GroupSink] = OnContext()
    jsonl_writer: OnContext[Optional[JsonlGroupWriter]] = OnContext()
    metrics_logger: OnContext[MetricsSink] = OnContext()
    drop_counts: OnContext[Counter[str]] = OnContext()
    backlog: OnContext[list[Item]] = OnContext()
    items_sent_this_step: OnContext[int] = OnContext()
    completion_lengths: OnContext[list[int]] = OnContext()
    rollouts_for_wandb: OnContext[list[list[Rollout]]] = OnContext()
    eval_metrics: OnContext[list[tuple[str, Any]]] = OnContext()

    def _init_atropos_attributes(self, config: BaseEnvConfig, n_servers: int) -> None:
        """Set Atropos's object attributes (``BaseEnv.__init__`` calls this once its servers
        exist)."""
        self.workers = set()
        self.eval_workers = set()
        self.max_num_workers = (
            config.max_num_workers
            if config.max_num_workers > 0
            else config.max_num_workers_per_node * n_servers
        )

    @property
    def derived_batch_size(self: EnvRuntime) -> int:
        """Atropos's name: this env's share of a batch given the API's unallocated fraction and
        ``min_batch_allocation``."""
        return self.context.derived_batch_size(self.config)

    # --- sending and logging -----------------------------------------------------------------
    @default_hook
    async def handle_send_to_api(
        self: EnvRuntime,
        scored_data: Groups,
        item: Item = None,
        do_send_to_api: bool = True,
        abort_on_any_max_length_exceeded: bool = True,
    ) -> list[ScoredDataGroup]:
        """Atropos's name: filter, validate and stamp groups, save them to JSONL if configured,
        hand them to the sink."""
        return await send_groups(
            self, scored_data, item, do_send_to_api, abort_on_any_max_length_exceeded
        )

    @default_hook
    async def wandb_log(self: EnvRuntime, wandb_metrics: Optional[dict[str, Any]] = None) -> None:
        """Atropos's name: log this step's metrics (an override adds its own, then calls super());
        envs report with ``add_metric`` / ``set_metric`` instead."""
        await log_step_metrics(self, wandb_metrics)

    @default_hook
    async def add_rollouts_for_wandb(
        self: EnvRuntime, scored_data: ScoredDataGroup, item: Item = None
    ) -> None:
        """Atropos's name: keep a few decoded rollouts of a sent group for the rollout table."""
        keep_rollouts(self.context, self.config, self.tokenizer, scored_data)

    @default_hook
    async def create_rollout_table(
        self: EnvRuntime, wandb_metrics: dict[str, Any]
    ) -> dict[str, Any]:
        """Atropos's name: add the kept rollouts to ``wandb_metrics`` as a table
        (``train/rollouts``)."""
        return rollout_table(self.context, wandb_metrics)

    def perf_stats(self, metrics_dict: dict[str, Any]) -> dict[str, Any]:
        """Atropos's name: the hook for performance metrics; the runner logs its own counters, so
        this adds none."""
        return metrics_dict

    async def evaluate_log(
        self: EnvRuntime,
        metrics: dict[str, Any],
        task_name: Optional[str] = None,
        model_name: Optional[str] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
        generation_parameters: Optional[dict[str, Any]] = None,
        samples: Optional[list[dict[str, Any]]] = None,
        verbose: bool = True,
    ) -> None:
        """Atropos's name: write ``metrics.json`` (+ ``samples.jsonl``) to
        ``data_dir_to_save_evals``, print a table (``envkit.evaluation.report_eval`` calls it)."""
        end_time = end_time or time.time()
        run = EvalRun(
            metrics, task_name, model_name, start_time, end_time, generation_parameters, samples
        )
        write_eval_results(self, run, verbose=verbose)

    # --- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self: EnvRuntime, step: int, data: Optional[dict[str, Any]] = None) -> None:
        """Atropos's name: persist ``data`` (JSON) for ``step``; subclasses add their state and
        call super()."""
        checkpoint.save_env(self.context, self.name, step, data)

    def load_checkpoint(self: EnvRuntime) -> None:
        """Atropos's name: restore attributes saved for ``curr_step`` (called on resume)."""
        for key, value in checkpoint.load_env(self.context, self.name).items():
            setattr(self, key, value)

    # --- the subcommands ---------------------------------------------------------------------
    async def env_manager(self: EnvRuntime) -> None:
        """Atropos's name: ``serve``: register with the API and keep its queue fed until
        ``total_steps``."""
        await serve(self)

    async def process_manager(self: EnvRuntime, n_groups: Optional[int] = None) -> None:
        """Atropos's name: ``process``: make ``total_steps`` groups locally (JSONL + HTML report),
        no API."""
        await process(self, n_groups=n_groups)

    # --- Atropos's serve-loop hooks (the runner calls an override; see runtime.atropos_hooks) --
    @default_hook
    async def get_server_info(self: EnvRuntime) -> None:
        """Atropos's name: read ``GET /info`` from ``rollout_server_url`` and apply it (batch
        size, token limit)."""
        await read_server_info(self.context, self.config)

    @default_hook
    async def env_step_checks(self) -> None:
        """Atropos's name: runs each tick after ``status_dict`` is refreshed, before the runner's
        own step checks (evals every ``steps_per_eval``, checkpoints, metrics), which need nothing
        from here."""
        return None

    @default_hook
    async def add_train_workers(self: EnvRuntime) -> None:
        """Atropos's name: start as many new items as the off-policy and eval limits allow (the
        runner's rule)."""
        await fill_workers(self.context)


__all__ = ["AtroposCompat", "OnContext", "context_of"]

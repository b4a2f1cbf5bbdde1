"""ATROPOS COMPATIBILITY: the ``BaseEnv`` names Atropos env files read, call or override.

Nothing here is part of the env contract (``base.BaseEnv`` shows that); these names exist so that env
files written for Atropos keep working unchanged. Each delegates to ``atroposlib.runtime``:

* run-time attributes (``env_id``, ``curr_step``, ``status_dict``, ``max_token_len``, ``backlog``,
  ``eval_metrics``, ...) are properties onto the env's ``RunContext`` (``OnContext``), so
  ``self.curr_step = 3`` in an env file writes the context the runtime reads;
* ``handle_send_to_api`` -> ``runtime.sending.send_groups``; ``add_rollouts_for_wandb`` /
  ``create_rollout_table`` -> ``runtime.step_metrics`` (these three, like ``BaseEnv.wandb_log``, are
  ``default_hook``s: the runtime calls its own implementation and goes through the env only when the
  env file overrides one); ``save_checkpoint`` / ``load_checkpoint`` ->
  ``runtime.checkpoint``; ``evaluate_log`` -> ``runtime.evaluation``; ``perf_stats`` adds nothing;
* ``env_manager`` / ``process_manager`` / ``cli`` -> the ``serve`` / ``process`` subcommands and the
  command line (``runtime.runner``, ``runtime.process``, ``runtime.cli``);
* the loop hooks ``get_server_info``, ``env_step_checks``, ``add_train_workers`` are
  ``default_hook``s: the serve runner calls an env's own version only when the env overrides one
  (``runtime.atropos_hooks``).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Generic, Optional, TypeVar, overload

from atroposlib.groups import Groups
from atroposlib.runtime import checkpoint
from atroposlib.runtime.atropos_hooks import default_hook, fill_workers, read_server_info
from atroposlib.runtime.cli import main
from atroposlib.runtime.context import EnvClass, EnvRuntime, Rollout, RunContext
from atroposlib.runtime.eval_results import EvalRun
from atroposlib.runtime.evaluation import write_eval_results
from atroposlib.runtime.metrics_logger import MetricsSink
from atroposlib.runtime.process import process
from atroposlib.runtime.runner import serve
from atroposlib.runtime.sending import send_groups
from atroposlib.runtime.sinks import GroupSink, JsonlGroupWriter
from atroposlib.runtime.step_metrics import keep_rollouts, rollout_table
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


class AtroposCompat:
    """Mixed into ``BaseEnv``: Atropos's names (see the module docstring)."""

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

    @property
    def derived_batch_size(self: EnvRuntime) -> int:
        """This env's share of a batch given the API's unallocated fraction and min_batch_allocation."""
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
        """Filter, validate and stamp groups, save them to JSONL if configured, hand them to the sink."""
        return await send_groups(
            self, scored_data, item, do_send_to_api, abort_on_any_max_length_exceeded
        )

    @default_hook
    async def add_rollouts_for_wandb(
        self: EnvRuntime, scored_data: ScoredDataGroup, item: Item = None
    ) -> None:
        """Keep a few decoded rollouts of a sent group for the rollout table."""
        keep_rollouts(self.context, self.config, self.tokenizer, scored_data)

    @default_hook
    async def create_rollout_table(
        self: EnvRuntime, wandb_metrics: dict[str, Any]
    ) -> dict[str, Any]:
        """Add the kept rollouts to ``wandb_metrics`` as a table (``train/rollouts``)."""
        return rollout_table(self.context, wandb_metrics)

    def perf_stats(self, metrics_dict: dict[str, Any]) -> dict[str, Any]:
        """Atropos hook for performance metrics; the runner logs its own counters, so this adds none."""
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
        """Write ``metrics.json`` (+ ``samples.jsonl``) to ``data_dir_to_save_evals``, print a table."""
        end_time = end_time or time.time()
        run = EvalRun(
            metrics, task_name, model_name, start_time, end_time, generation_parameters, samples
        )
        write_eval_results(self, run, verbose=verbose)

    # --- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self: EnvRuntime, step: int, data: Optional[dict[str, Any]] = None) -> None:
        """Persist ``data`` (JSON) for ``step``; subclasses add their state and call super()."""
        checkpoint.save_env(self.context, self.name, step, data)

    def load_checkpoint(self: EnvRuntime) -> None:
        """Restore attributes saved for ``curr_step`` (called on resume)."""
        for key, value in checkpoint.load_env(self.context, self.name).items():
            setattr(self, key, value)

    # --- the subcommands ---------------------------------------------------------------------
    async def env_manager(self: EnvRuntime) -> None:
        """``serve``: register with the API and keep its queue fed until ``total_steps``."""
        await serve(self)

    async def process_manager(self: EnvRuntime, n_groups: Optional[int] = None) -> None:
        """``process``: make ``total_steps`` groups locally (JSONL + HTML report), no API."""
        await process(self, n_groups=n_groups)

    @classmethod
    def cli(cls: EnvClass) -> None:
        """``python my_env.py serve|process|evaluate [--config F] [--env.X V] [--openai.X V]``."""
        main(cls)

    # --- Atropos's serve-loop hooks (the runner calls an override; see runtime.atropos_hooks) --
    @default_hook
    async def get_server_info(self: EnvRuntime) -> None:
        """Read ``GET /info`` from ``rollout_server_url`` and apply it (batch size, token limit)."""
        await read_server_info(self.context, self.config)

    @default_hook
    async def env_step_checks(self) -> None:
        """Runs each tick after ``status_dict`` is refreshed, before the runner's own step checks
        (evals every ``steps_per_eval``, checkpoints, metrics), which need nothing from here."""
        return None

    @default_hook
    async def add_train_workers(self: EnvRuntime) -> None:
        """Start as many new items as the off-policy and eval limits allow (the runner's rule)."""
        await fill_workers(self.context)


__all__ = ["AtroposCompat", "OnContext", "context_of"]

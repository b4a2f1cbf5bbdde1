"""The seam between an environment and its runtime: ``RunContext`` and the ``EnvRuntime`` protocol.

``RunContext`` holds an env's run-time state, as opposed to what the user configured:

* what the API and the trainer assign: the env id and wandb name from registration, the trainer
  step (policy version), the API's ``/status-env`` dict, the trainer's batch size, token limit and
  step count (``/register-env``, ``/info``), the checkpoint directory and interval;
* what the subcommand sets up: where finished groups go (the sink, the JSONL file), where metrics
  go (the logger), ``process``'s mode and counts, ``serve``'s worker filler;
* what accumulates while it runs: the item backlog, drop counts, the metric buffers that
  ``add_metric``/``set_metric`` fill and ``wandb_log`` drains, completion lengths, rollouts kept
  for the rollout table, ``evaluate()``'s ``(name, value)`` pairs and its items' tally
  (evaluated, skipped; ``eval_items``), the sample scorer (``score_samples``) and its counts.

The runtime writes run-time state here and nowhere else: never into the loaded config (so it keeps
meaning "what the user asked for" and ``LoadedConfig.sources`` stays true), never onto the env
object. ``BaseEnv`` shows the Atropos attribute names (``env_id``, ``curr_step``, ``backlog``, ...)
as properties onto its context, so Atropos env files read and assign them as before.

``EnvRuntime`` is everything the runtime uses of an env (``BaseEnv`` satisfies it): its config,
context, inference servers and tokenizer, the hooks an author writes (``setup``, ``get_next_item``,
``collect_trajectories``, ``postprocess_histories``, ``evaluate``, ``cleanup``) and the
Atropos-named members the runtime uses because env files read or override them
(``max_num_workers``, sending, ``wandb_log``, the rollout table, checkpoints, ``get_server_info``,
``env_step_checks``, ``add_train_workers``). ``EnvClass`` is what the CLI uses of an env's class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from atroposlib.groups import Groups
from atroposlib.inference_clients.server_manager import ServerManager
from atroposlib.runtime.config import BaseEnvConfig, ServerConfigs
from atroposlib.runtime.eval_tally import EvalTally
from atroposlib.runtime.metrics_logger import MetricsSink, NullMetricsLogger
from atroposlib.runtime.scoring import SampleScorer
from atroposlib.runtime.sinks import GroupSink, JsonlGroupWriter, NullSink
from atroposlib.type_definitions import Item, ScoredDataGroup

Rollout = tuple[Any, ...]
"""One row of the rollout table: ``(text, score, extra columns ...)``."""


@dataclass
class MetricBuffers:
    """Metrics an env reports between two ``wandb_log`` calls.

    ``means``: values added with ``add_metric``; each name is logged as the mean of its values, then
    emptied. ``gauges``: values set with ``set_metric``; logged as they are on every call."""

    means: dict[str, list[float]] = field(default_factory=dict)
    gauges: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.means.setdefault(name, []).append(float(value))

    def drain(self) -> dict[str, Any]:
        """The means of the non-empty buffers plus every gauge; the buffers are emptied."""
        out: dict[str, Any] = {k: sum(v) / len(v) for k, v in self.means.items() if v}
        self.means.clear()
        out.update(self.gauges)
        return out

    def gauges_text(self) -> str:
        """The gauges as ``name=value`` words, sorted (serve's last ``env counters:`` line)."""
        return " ".join(f"{k}={v}" for k, v in sorted(self.gauges.items()))


@dataclass
class RunContext:
    """An env's run-time state (see the module docstring).

    ``batch_size`` / ``total_steps`` are ``None`` until the trainer sets them; the effective values
    (``effective_batch_size``/``effective_total_steps``) fall back to the config's."""

    # assigned by the trajectory API and the trainer
    env_id: Optional[int] = None
    wandb_prepend: Optional[str] = None
    curr_step: int = 0
    status_dict: dict[str, Any] = field(default_factory=dict)
    max_token_len: int = -1
    batch_size: Optional[int] = None
    total_steps: Optional[int] = None
    checkpoint_dir: str = ""
    checkpoint_interval: int = -1
    # set up by the subcommand
    group_sink: GroupSink = field(default_factory=NullSink)
    jsonl_writer: Optional[JsonlGroupWriter] = None
    groups_path: Optional[str] = None
    metrics_logger: MetricsSink = field(default_factory=NullMetricsLogger)
    process_mode: bool = False
    n_groups_to_process: Optional[int] = None
    group_size_to_process: Optional[int] = None
    fill_workers: Optional[Callable[[], Awaitable[None]]] = None
    """Set by ``serve``: start as many items as its limits allow (what ``add_train_workers`` does)."""
    # accumulated while running
    backlog: list[Item] = field(default_factory=list)
    drop_counts: Counter[str] = field(default_factory=Counter)
    all_equal_kept: int = 0
    """Groups sent or written although their scores are all equal (``ensure_scores_are_not_same``
    off): no learning signal for GRPO, counted so that it is never a surprise."""
    generation_notes: Counter[str] = field(default_factory=Counter)
    """Groups sent with something to say about how they were generated (``sending``)."""
    items_sent_this_step: int = 0
    metrics: MetricBuffers = field(default_factory=MetricBuffers)
    completion_lengths: list[int] = field(default_factory=list)
    rollouts_for_wandb: list[list[Rollout]] = field(default_factory=list)
    eval_metrics: list[tuple[str, Any]] = field(default_factory=list)
    eval_logged: bool = False
    eval_tally: EvalTally = field(default_factory=EvalTally)
    scorer: Optional[SampleScorer] = None
    """``score_samples``'s limits, worker processes and counts, made on its first use."""

    def sample_scorer(self, config: BaseEnvConfig) -> SampleScorer:
        """The run's ``SampleScorer`` (made from ``score_timeout`` / ``score_workers`` on first use)."""
        if self.scorer is None:
            self.scorer = SampleScorer(config.score_timeout, config.score_workers)
        return self.scorer

    def close_scorer(self) -> None:
        """Stop the scoring worker processes (at the end of a subcommand)."""
        if self.scorer is not None:
            self.scorer.close()

    def effective_batch_size(self, config: BaseEnvConfig) -> int:
        """The trainer's batch size once ``/info`` gave one, else the configured one."""
        return self.batch_size if self.batch_size is not None else config.batch_size

    def effective_total_steps(self, config: BaseEnvConfig) -> int:
        """The trainer's step count when the config left ``total_steps`` at -1, else the config's."""
        return self.total_steps if self.total_steps is not None else config.total_steps

    def batch_share(self, config: BaseEnvConfig) -> Optional[float]:
        """The fraction of every batch guaranteed to this env: its ``min_batch_allocation``, else
        the share the API gives it (``/status-env``'s ``batch_share``, run-api --batch-shares
        weight); None when it has none."""
        if config.min_batch_allocation is not None:
            return config.min_batch_allocation
        share = self.status_dict.get("batch_share")
        return float(share) if isinstance(share, (int, float)) else None

    def derived_batch_size(self, config: BaseEnvConfig) -> int:
        """This env's share of a batch given the API's unallocated fraction and its guaranteed
        share (``batch_share``; -1 while the batch size is unknown)."""
        batch_size = self.effective_batch_size(config)
        if not self.status_dict or batch_size == -1:
            return batch_size
        fraction = float(self.status_dict.get("unallocated_fraction", 1.0))
        share = self.batch_share(config)
        if share is not None:
            fraction += share
        return int(batch_size * fraction)


class TokenDecoder(Protocol):
    """What the runtime uses of an env's tokenizer: turning token ids back into text."""

    def decode(self, token_ids: list[int]) -> str: ...


class EnvRuntime(Protocol):
    """What the runtime (serve, process, evaluate and their collaborators) uses of an env."""

    @property
    def name(self) -> Optional[str]: ...

    @property
    def config(self) -> BaseEnvConfig: ...

    @property
    def context(self) -> RunContext: ...

    @property
    def server(self) -> ServerManager: ...

    @property
    def tokenizer(self) -> TokenDecoder: ...

    # the hooks an author writes
    async def setup(self) -> None: ...

    async def get_next_item(self) -> Optional[Item]: ...

    async def collect_trajectories(self, item: Item) -> tuple[Groups, list[Item]]: ...

    async def postprocess_histories(self, trajectories: Groups) -> Groups: ...

    async def evaluate(self, *args: Any, **kwargs: Any) -> None: ...

    async def cleanup(self) -> None: ...

    # Atropos-named members the runtime uses, because env files read, call or override them
    @property
    def max_num_workers(self) -> int: ...

    async def wandb_log(self, wandb_metrics: Optional[dict[str, Any]] = None) -> None: ...

    async def handle_send_to_api(
        self,
        scored_data: Groups,
        item: Item = None,
        do_send_to_api: bool = True,
        abort_on_any_max_length_exceeded: bool = True,
    ) -> list[ScoredDataGroup]: ...

    async def add_rollouts_for_wandb(
        self, scored_data: ScoredDataGroup, item: Item = None
    ) -> None: ...

    async def create_rollout_table(self, wandb_metrics: dict[str, Any]) -> dict[str, Any]: ...

    def save_checkpoint(self, step: int, data: Optional[dict[str, Any]] = None) -> None: ...

    def load_checkpoint(self) -> None: ...

    async def get_server_info(self) -> None: ...

    async def env_step_checks(self) -> None: ...

    async def add_train_workers(self) -> None: ...


class EnvClass(Protocol):
    """What the CLI and the config loader use of an env's class."""

    __name__: str

    @property
    def name(self) -> Optional[str]: ...

    def config_init(self) -> tuple[BaseEnvConfig, ServerConfigs]: ...

    def __call__(
        self,
        config: BaseEnvConfig,
        server_configs: ServerConfigs,
        slurm: bool = False,
        testing: bool = False,
    ) -> EnvRuntime: ...


__all__ = [
    "EnvClass",
    "EnvRuntime",
    "MetricBuffers",
    "Rollout",
    "RunContext",
    "TokenDecoder",
]

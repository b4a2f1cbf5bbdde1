"""The seam between an environment and its runtime: ``RunContext`` and the ``EnvRuntime`` protocol.

``RunContext`` holds what the runtime (``serve``/``process``/``evaluate``) assigns at run time, as
opposed to what the user configured: the env id and wandb name the API gave at registration, the
trainer step (policy version), the API's ``/status-env`` dict, the trainer's batch size, token limit
and step count from ``/register-env`` and ``/info``, the checkpoint directory and interval, where
finished groups go (the sink) and where metrics go (the logger), plus the metric buffers that
``BaseEnv.add_metric`` fills and ``BaseEnv.wandb_log`` drains. The runtime writes here, never into
the loaded config, so the config keeps meaning "what the user asked for" (``LoadedConfig.sources``
stays true).

``BaseEnv`` exposes the Atropos attribute names (``env_id``, ``curr_step``, ``status_dict``,
``max_token_len``, ``wandb_prepend``, ``checkpoint_dir``, ...) as properties onto its context, so
Atropos env files read and assign them as before.

``EnvRuntime`` is what the collaborators (runner, sending, process, evaluation, registration, step
hooks) need from an env; they are typed against it instead of ``Any``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol

from atroposlib.envs.metrics_logger import NullMetricsLogger

if TYPE_CHECKING:
    from atroposlib.envs.config import BaseEnvConfig
    from atroposlib.envs.sending import GroupSink, JsonlGroupWriter


class MetricsSink(Protocol):
    """Where ``wandb_log`` sends a step's metrics (wandb, or nothing)."""

    def log(self, metrics: dict[str, Any], step: Optional[int] = None) -> None: ...

    def table(self, columns: list[str], rows: list[tuple]) -> Any: ...

    def finish(self) -> None: ...


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


@dataclass
class RunContext:
    """What the runtime assigned to this env for this run (see the module docstring).

    ``batch_size`` / ``total_steps`` are ``None`` until the trainer sets them; the effective values
    (``effective_batch_size``/``effective_total_steps``) fall back to the config's."""

    env_id: Optional[int] = None
    curr_step: int = 0
    status_dict: dict[str, Any] = field(default_factory=dict)
    max_token_len: int = -1
    batch_size: Optional[int] = None
    total_steps: Optional[int] = None
    wandb_prepend: Optional[str] = None
    checkpoint_dir: str = ""
    checkpoint_interval: int = -1
    groups_path: Optional[str] = None
    process_mode: bool = False
    n_groups_to_process: Optional[int] = None
    group_size_to_process: Optional[int] = None
    group_sink: Optional[GroupSink] = None
    metrics_logger: MetricsSink = field(default_factory=NullMetricsLogger)
    metrics: MetricBuffers = field(default_factory=MetricBuffers)
    drop_counts: Counter = field(default_factory=Counter)
    eval_logged: bool = False
    fill_workers: Optional[Callable[[], Awaitable[None]]] = None
    """Set by ``serve``: start as many items as its limits allow (what ``add_train_workers`` does)."""

    def effective_batch_size(self, config: BaseEnvConfig) -> int:
        """The trainer's batch size once ``/info`` gave one, else the configured one."""
        return self.batch_size if self.batch_size is not None else config.batch_size

    def effective_total_steps(self, config: BaseEnvConfig) -> int:
        """The trainer's step count when the config left ``total_steps`` at -1, else the config's."""
        return self.total_steps if self.total_steps is not None else config.total_steps


class OnContext:
    """A ``BaseEnv`` attribute that lives on its ``RunContext`` under the same name, so Atropos env
    files keep reading and assigning ``self.curr_step``, ``self.env_id``, ... as before."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(context_of(obj), self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(context_of(obj), self.name, value)


def context_of(env: Any) -> RunContext:
    """``env.context``, made on first use (an env file may assign ``self.curr_step`` before calling
    ``BaseEnv.__init__``)."""
    ctx = env.__dict__.get("context")
    if ctx is None:
        ctx = env.__dict__["context"] = RunContext()
    return ctx


class EnvRuntime(Protocol):
    """What the runtime's collaborators use of an environment (``BaseEnv`` satisfies it)."""

    name: Optional[str]
    config: BaseEnvConfig
    context: RunContext
    server: Any
    tokenizer: Any
    backlog: list[Any]
    max_num_workers: int
    jsonl_writer: Optional[JsonlGroupWriter]
    eval_metrics: list[tuple[str, Any]]
    env_id: Optional[int]
    curr_step: int
    status_dict: dict[str, Any]
    max_token_len: int
    wandb_prepend: Optional[str]
    checkpoint_dir: str
    checkpoint_interval: int
    process_mode: bool
    items_sent_this_step: int
    drop_counts: Counter
    metrics_logger: MetricsSink
    group_sink: GroupSink

    @property
    def derived_batch_size(self) -> int: ...

    async def setup(self) -> None: ...

    async def get_next_item(self) -> Any: ...

    async def collect_trajectories(self, item: Any) -> tuple[Any, list[Any]]: ...

    async def postprocess_histories(self, trajectories: Any) -> Any: ...

    async def handle_send_to_api(
        self,
        scored_data: Any,
        item: Any = None,
        do_send_to_api: bool = True,
        abort_on_any_max_length_exceeded: bool = True,
    ) -> list[dict[str, Any]]: ...

    async def evaluate(self, *args: Any, **kwargs: Any) -> None: ...

    async def cleanup(self) -> None: ...

    async def wandb_log(self, wandb_metrics: Optional[dict[str, Any]] = None) -> None: ...

    def save_checkpoint(self, step: int, data: Optional[dict[str, Any]] = None) -> None: ...

    def load_checkpoint(self) -> None: ...


__all__ = [
    "EnvRuntime",
    "MetricBuffers",
    "MetricsSink",
    "OnContext",
    "RunContext",
    "context_of",
]

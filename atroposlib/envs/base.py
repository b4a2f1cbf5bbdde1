"""The ``BaseEnv`` contract (Atropos-compatible). Subclass it, implement a few hooks, call ``cli()``.

The contract, which is all that ``dir()`` and ``help()`` show of an env
(``tests/envs/test_surface.py`` holds the list; docs/environments.md, "The contract", explains each
name)::

    class attributes  name, env_config_cls
    class methods     config_init(), server_namespaces(), cli()
    hooks you write   setup(), get_next_item(),
                      collect_trajectories(item) or collect_trajectory(item),
                      evaluate(), postprocess_histories(groups), cleanup()
    helpers you call  add_metric(name, value), set_metric(name, value), score_samples(fn, samples),
                      group_builder()
    on the object     config, server (a ServerManager), tokenizer, context (a RunContext)

An environment::

    class MyEnv(BaseEnv):
        name = "my_env"
        @classmethod
        def config_init(cls): return BaseEnvConfig(...), [APIServerConfig(...)]
        async def setup(self): ...                      # load data
        async def get_next_item(self): ...              # next prompt/item (None: nothing now)
        async def collect_trajectories(self, item):     # -> (group | list of groups | None, backlog)
        # or: async def collect_trajectory(self, item)  # -> (ScoredDataItem | None, backlog), x group_size
        async def evaluate(self, *a, **kw): ...         # optional
    if __name__ == "__main__":
        MyEnv.cli()

``add_metric`` / ``set_metric`` report values (the runtime logs them each step);
``await self.score_samples(fn, samples)`` scores off the event loop within ``--env.score_timeout``.
A group is built with ``self.group_builder()`` (``atroposlib.groups.GroupBuilder``) or, as in
Atropos, as a ``ScoredDataGroup`` dict.

What runs an env (serve / process / evaluate, sending, checkpoints, the rollout table) is
``atroposlib.runtime``; it uses the env through ``self.context`` (a ``RunContext``: env id, trainer
step, where groups and metrics go). The Atropos-named methods and attributes env files also use
(``handle_send_to_api``, ``wandb_log``, ``evaluate_log``, ``save_checkpoint``, ``env_manager``,
``self.curr_step``, ...) come from ``atropos_compat.AtroposCompat``, a base class whose names
``dir()`` leaves out (``surface``: why that layer is hidden rather than moved), and delegate to the
runtime.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from atroposlib.envs.atropos_compat import AtroposCompat, context_of
from atroposlib.envs.surface import EnvMeta, visible
from atroposlib.groups import GroupBuilder, Groups, group_from_items
from atroposlib.inference_clients.backend import APIServer
from atroposlib.inference_clients.server_manager import (
    APIServerConfig,
    ServerBaseline,
    ServerManager,
)
from atroposlib.runtime.atropos_hooks import default_hook
from atroposlib.runtime.cli import main
from atroposlib.runtime.config import BaseEnvConfig, EvalHandlingEnum, ServerConfigs
from atroposlib.runtime.context import EnvClass, EnvRuntime, RunContext
from atroposlib.runtime.sinks import JsonlGroupWriter
from atroposlib.type_definitions import Item, Message, ScoredDataGroup, ScoredDataItem
from atroposlib.utils.tokenizer_loading import load_tokenizer

logger = logging.getLogger(__name__)


class BaseEnv(AtroposCompat, metaclass=EnvMeta):
    """An RL environment: produces scored groups of rollouts for the trainer.

    Its contract: ``name``, ``env_config_cls``; ``config_init()``, ``server_namespaces()``,
    ``cli()``; the hooks ``setup()``, ``get_next_item()``, ``collect_trajectories(item)`` (or
    ``collect_trajectory(item)``), ``evaluate()``, ``postprocess_histories()``, ``cleanup()``; the
    helpers ``add_metric()``, ``set_metric()``, ``score_samples()``, ``group_builder()``; and on the
    object ``config``, ``server``, ``tokenizer``, ``context``. Atropos's names (``curr_step``,
    ``handle_send_to_api``, ``save_checkpoint``, ``wandb_log``, ...) work too, listed in
    ``atroposlib.envs.atropos_compat``; ``dir()`` and ``help()`` leave them out."""

    name: Optional[str] = None
    env_config_cls: type[BaseEnvConfig] = BaseEnvConfig

    def __init__(
        self,
        config: BaseEnvConfig,
        server_configs: Union[ServerConfigs, APIServerConfig],
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
            progress_interval=config.progress_interval,
            on_token_drift=config.on_token_drift,
        )
        self.server.set_reasoning(
            config.thinking_mode, config.reasoning_effort, config.max_reasoning_tokens
        )
        self.tokenizer = load_tokenizer(config.tokenizer_name)
        ctx = self.context
        if config.data_path_to_save_groups is not None:
            ctx.jsonl_writer = JsonlGroupWriter(config.data_path_to_save_groups)
            ctx.groups_path = str(ctx.jsonl_writer.path)
        self._init_atropos_attributes(config, len(self.server.servers))

    def __dir__(self) -> list[str]:
        """The contract plus what this env's own classes and object add (``surface``)."""
        return visible(type(self), super().__dir__())

    @property
    def context(self) -> RunContext:
        """What the runtime assigned to this env for this run (``atroposlib.runtime.context``)."""
        return context_of(self)

    # --- configuration ---------------------------------------------------------------------
    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, ServerConfigs]:
        """Default configs of this env; the CLI layers YAML and flags on top."""
        return cls.env_config_cls(), ServerBaseline()

    @classmethod
    def server_namespaces(cls) -> dict[str, Optional[Union[ServerConfigs, APIServerConfig]]]:
        """Groups of inference servers this env takes besides its own (e.g. a teacher): name ->
        default configs (None: none unless configured). Each gets ``--<name>.FIELD`` flags and a
        ``<name>:`` YAML key, and reaches ``__init__`` as ``<name>_server_configs=``. None here."""
        return {}

    @classmethod
    def cli(cls) -> None:
        """``python my_env.py serve|process|evaluate [--config F] [--env.X V] [--openai.X V]``."""
        # an env class is an EnvClass, but mypy does not match a class object to a protocol with
        # __call__; the cast keeps ``MyEnv.cli()`` type-checking in every env file
        main(cast(EnvClass, cls))

    # --- hooks -----------------------------------------------------------------------------
    async def setup(self) -> None:
        """Load datasets and state. Called once before anything else."""

    async def get_next_item(self) -> Optional[Item]:
        """The next item to make a group from (None: nothing right now)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_next_item()")

    async def collect_trajectory(self, item: Item) -> tuple[Optional[ScoredDataItem], list[Item]]:
        """One scored sequence for ``item`` (and items for the backlog); the default
        ``collect_trajectories`` calls it ``group_size`` times."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement collect_trajectories(item) or collect_trajectory(item)"
        )

    async def collect_trajectories(self, item: Item) -> tuple[Groups, list[Item]]:
        """The group(s) for ``item`` and items for the backlog. Default: ``group_size`` concurrent
        ``collect_trajectory`` calls, combined into one group."""
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

    async def postprocess_histories(self, trajectories: Groups) -> Groups:
        """Optional last pass over collected groups (e.g. add advantages)."""
        return trajectories

    @default_hook
    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Run the env's evaluation; called every ``steps_per_eval`` trainer steps and by ``evaluate``."""
        logger.info("%s defines no evaluate(); nothing to evaluate", type(self).__name__)

    async def cleanup(self) -> None:
        """Optional: called after every handled item."""

    # --- scoring ---------------------------------------------------------------------------
    async def score_samples(
        self, fn: Callable[[Any], Any], samples: Sequence[Any], *, processes: bool = False
    ) -> list[Any]:
        """``fn(sample)`` for each sample, off the event loop and concurrently, each within
        ``--env.score_timeout`` seconds; None where a sample has no score (it timed out, raised or
        got None: counted by kind, and ``group.add(..., score=None)`` marks its reward unavailable).
        ``processes=True`` runs ``fn`` in worker processes (CPU-bound scorers; ``fn`` must pickle).
        See ``atroposlib.runtime.scoring``."""
        scorer = self.context.sample_scorer(self.config)
        return await scorer.score(fn, samples, processes=processes)

    # --- metrics ---------------------------------------------------------------------------
    def add_metric(self, name: str, value: float) -> None:
        """Report one value of ``name``; the step's metrics log the mean of the values since the
        last step (e.g. ``self.add_metric("train/percent_correct", 1.0)`` per rollout)."""
        self.context.metrics.add(name, value)

    def set_metric(self, name: str, value: Any) -> None:
        """Set a value (a counter, a gauge) that every following step's metrics log as it is."""
        self.context.metrics.gauges[name] = value

    # --- helpers for envs ------------------------------------------------------------------
    def group_builder(self, **kwargs: Any) -> GroupBuilder:
        """A ``GroupBuilder`` for one item's group (see ``atroposlib.groups``)."""
        return GroupBuilder(**kwargs)


if TYPE_CHECKING:

    def _runs_on_the_runtime(env: BaseEnv) -> EnvRuntime:
        return env  # a type checker verifies here that BaseEnv satisfies the runtime's protocol


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

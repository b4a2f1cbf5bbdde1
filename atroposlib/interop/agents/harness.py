"""``AgentHarnessEnv``: an env whose episode is one run of an unmodified agent program in a fresh proxy
session, scored by the env's own reward, so that any agent framework trains without edits to the
agent's code.

A subclass says what the task is: ``get_next_item()`` (an item), ``task_of(item)`` (the text the agent
is given), ``reward_of(item, answer)`` (its reward for the agent's final answer) and, for
``evaluate``, ``eval_items()``. The ``--agent.*`` section (``AgentSettings``) says which program
(``program.AgentProgram``: a callable or a command), its time and turn limits, and which proxy (by
default one served in this process, ``proxy_host``, over the env's ``--openai.*`` servers).

An episode: open a session whose turn limit is ``--agent.max_turns`` chat completions, run the program
against it (at most ``--agent.episode_timeout`` seconds), read what the session recorded, close it.
Its outcome (counted as ``agent/outcome/<kind>``, the first of each kind logged with why):

* ``answered``: the program ended with an answer: ``reward_of(item, answer)``;
* ``past max turns``: it asked for more completions than the limit (the proxy refused the next):
  reward 0.0 (the env's policy failed, as an env's own ``max_turns`` scores it);
* ``crashed`` / ``timed out``: the program failed or ran out of time: its reward is unavailable
  (``None``, never a 0), what it generated is kept with that mark, and it is counted.

Every node the session recorded is a sequence of the group with the episode's reward (one node for a
framework that replays the model's tool calls as it wrote them; one per turn for one that replays
history as text, counted by the proxy as history edits, ``agent/history_edits``; a group whose count
of sequences is not ``group_size`` says its own in ``group_overrides``, Atropos's field for it, so
that it is not dropped as the wrong size); each carries
``overrides`` ``{"episode": ..., "token_exact": ...}`` (the node checked against the backend's own ids,
``exactness``; a difference is counted in ``train/token_drifts``) and the weights versions that
generated it, which go into the item's generation log too; the group's ``generation_params`` say
the temperature its completions were sampled at, when they all were at one (what a trainer reading
tempered log-probabilities divides by). A program that cannot be imported or
started is one ``ConfigError`` line at start-up, not a run of unavailable episodes.

The env does not run the agent's loop, so it cannot stop an episode before it outgrows the trainer's
sequence length (``--env.max_token_length``, or the trainer's ``max_token_len`` when smaller). A node
longer than that is cut to it (tokens, masks and log-probabilities alike) and marked ``overlong``,
the mark a reply cut at ``max_tokens`` carries, so that the trainer's ``--overlong`` rule applies
(by default: out of the loss, still in its group's baseline); cut nodes are counted in
``agent/truncated_sequences``. Without the cut the runtime drops the whole group as ``too_long``: a
policy whose episodes grow long would stop sending groups at all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from atroposlib.envkit.tally import Tally
from atroposlib.envs.base import BaseEnv
from atroposlib.errors import ConfigError, InferenceError
from atroposlib.inference_clients.generation_log import note_versions
from atroposlib.inference_clients.managed_server import SequenceNode
from atroposlib.inference_clients.proxy.settings import ProxySettings
from atroposlib.interop.agents.exactness import node_problem, session_turns
from atroposlib.interop.agents.program import AgentCall, AgentOutcome, AgentProgram
from atroposlib.interop.agents.proxy_host import ProxyHost
from atroposlib.interop.agents.session_client import Recorded, SessionClient
from atroposlib.interop.turns import require_exact_tokens
from atroposlib.runtime.config import BaseEnvConfig
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)

OUTCOMES = ("answered", "past max turns", "crashed", "timed out")


class AgentSettings(BaseModel):
    """The agent program and its limits (flags ``--agent.<field>``)."""

    program: str = Field(
        default="",
        description="module:function (a callable given an AgentCall, returning the answer) or a "
        "command line ({python:NAME} is agent framework NAME's Python); required.",
    )
    mode: Literal["per_episode", "persistent"] = Field(
        default="per_episode",
        description="per_episode: a command started for each episode; persistent: one process "
        "serving many (the example programs' --serve), its framework imported once.",
    )
    episode_timeout: float = Field(
        default=300.0, gt=0, description="Seconds one episode may take; then it is killed."
    )
    max_turns: int = Field(
        default=8,
        ge=1,
        description="Chat completions one episode may ask for; the next is refused.",
    )
    max_tokens: int = Field(
        default=256, ge=1, description="Reply budget the agent is given (ATROPOS_AGENT_MAX_TOKENS)."
    )
    temperature: Optional[float] = Field(
        default=None,
        ge=0.0,
        description="Sampling temperature the agent is given (ATROPOS_AGENT_TEMPERATURE); none: "
        "the agent's own (the proxy's default is 1.0).",
    )
    eval_temperature: Optional[float] = Field(
        default=0.0, ge=0.0, description="The temperature given to evaluation episodes."
    )
    proxy_url: Optional[str] = Field(
        default=None,
        description="An atropos-proxy to open sessions on; none: one served in this process over "
        "the --openai.* servers.",
    )
    proxy_api_key: Optional[str] = Field(
        default=None, description="That proxy's key (default: $ATROPOS_PROXY_API_KEY)."
    )


class AgentHarnessConfig(BaseEnvConfig):
    """``BaseEnvConfig`` plus the ``agent`` section."""

    agent: AgentSettings = Field(
        default_factory=AgentSettings, description="The agent program and its limits."
    )


@dataclass
class AgentEpisode:
    """One played episode: its outcome, answer, reward and what its session recorded."""

    task: str
    outcome: str
    answer: Optional[str]
    reward: Optional[float]
    seconds: float
    detail: str = ""
    nodes: list[SequenceNode] = field(default_factory=list)
    problems: list[Optional[str]] = field(default_factory=list)  # per node: None when exact
    turns: int = 0
    temperatures: set[float] = field(default_factory=set)  # what its completions were sampled at

    def record(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "outcome": self.outcome,
            "answer": self.answer,
            "reward": self.reward,
            "turns": self.turns,
            "nodes": len(self.nodes),
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
        }


def cut_to_length(node: SequenceNode, limit: int) -> Optional[SequenceNode]:
    """``node`` cut to its first ``limit`` tokens and marked ``overlong``; None when it fits."""
    if limit <= 0 or len(node.tokens) <= limit:
        return None
    meta = {**(node.metadata or {}), "overlong": True, "truncated_from": len(node.tokens)}
    return node.model_copy(
        update={
            "tokens": node.tokens[:limit],
            "masked_tokens": node.masked_tokens[:limit],
            "logprobs": node.logprobs[:limit],
            "metadata": meta,
        }
    )


def classify(outcome: AgentOutcome, recorded: Recorded) -> tuple[str, bool]:
    """(outcome kind, whether the reward is the env's to give) of a finished run."""
    if recorded.turn_limit_hit:
        return "past max turns", False
    if outcome.status == "done":
        return "answered", True
    return outcome.status, False


class AgentHarnessEnv(BaseEnv):
    """See the module docstring; subclasses give the task (``task_of``, ``reward_of``, items)."""

    name = "agent_harness"
    env_config_cls = AgentHarnessConfig

    # --- what a subclass gives ------------------------------------------------------------------
    def task_of(self, item: Item) -> str:
        raise NotImplementedError

    def reward_of(self, item: Item, answer: str) -> float:
        raise NotImplementedError

    def eval_items(self) -> list[Item]:
        return []

    async def setup_task(self) -> None:
        """The task's own set-up (data, splits), after the program and the proxy are ready."""

    # --- the harness ----------------------------------------------------------------------------
    @property
    def settings(self) -> AgentSettings:
        config = self.config
        if not isinstance(config, AgentHarnessConfig):
            raise TypeError(
                f"{type(self).__name__} needs an AgentHarnessConfig, got {type(config)}"
            )
        return config.agent

    async def setup(self) -> None:
        s = self.settings
        self.program = AgentProgram.parse(s.program, persistent=s.mode == "persistent")
        self.program.check()
        await self.program.start()
        self.host: Optional[ProxyHost] = None
        key = s.proxy_api_key or os.environ.get("ATROPOS_PROXY_API_KEY") or None
        if s.proxy_url is None:
            require_exact_tokens(self.server, "agent harness")
            configs = [srv.config for srv in self.server.servers]
            self.host = ProxyHost(
                configs,
                self.tokenizer,
                str(configs[0].model_name),
                self.server.managed_stats,
                ProxySettings(max_sessions=max(1024, 4 * self.config.group_size)),
                on_token_drift=self.server.on_token_drift,
            ).start()
            key = None
        self.client = SessionClient(self.host.url if self.host else str(s.proxy_url), key)
        try:
            health = await self.client.health()
        except InferenceError as e:
            raise ConfigError(f"--agent.proxy_url: {e}") from None
        self.model_name = str(health.get("model"))
        self.api_key = key or "none"
        self.tally = Tally(self.set_metric, prefix="agent")
        for kind in OUTCOMES:
            self.set_metric(self.tally.metric_name("outcome", kind), 0)
        self.set_metric("train/token_drifts", 0)
        self.set_metric(self.tally.metric_name("truncated sequences"), 0)
        await self.setup_task()

    async def play(
        self, item: Item, temperature: Optional[float] = None, max_tokens: Optional[int] = None
    ) -> AgentEpisode:
        """One episode of ``item`` in a fresh session (see the module docstring)."""
        s = self.settings
        task = self.task_of(item)
        session = await self.client.open(s.max_turns)
        start = time.monotonic()
        try:
            call = AgentCall(
                self.client.url_of(session),
                self.api_key,
                self.model_name,
                task,
                max_tokens or s.max_tokens,
                temperature,
            )
            outcome = await self.program.run(call, s.episode_timeout)
            recorded = await self.client.recorded(session)
        finally:
            await self.client.close(session)
        kind, scored = classify(outcome, recorded)
        reward: Optional[float] = None
        if scored:
            reward = float(self.reward_of(item, outcome.answer or ""))
        elif kind == "past max turns":
            reward = 0.0
        turns = session_turns(recorded.completions)
        return AgentEpisode(
            task,
            kind,
            outcome.answer,
            reward,
            time.monotonic() - start,
            outcome.detail,
            recorded.nodes,
            [node_problem(n.tokens, n.masked_tokens, turns) for n in recorded.nodes],
            recorded.turns,
            {float(c["temperature"]) for c in recorded.completions if "temperature" in c},
        )

    def count(self, episode: AgentEpisode) -> None:
        """The episode's outcome, drifts and time in the env's metrics."""
        detail = episode.detail or (episode.answer or "")[:200]
        self.tally.count("outcome", episode.outcome, detail, quiet=episode.outcome == "answered")
        for problem in episode.problems:
            if problem is not None:
                self.tally.count("token drifts", None, problem)
                self.set_metric("train/token_drifts", self.tally.total("token drifts"))
        if episode.reward is not None:
            self.add_metric("train/reward", episode.reward)
        self.add_metric("agent/seconds", episode.seconds)
        self.add_metric("agent/nodes_per_episode", float(len(episode.nodes)))
        if self.host is not None:
            self.set_metric("agent/history_edits", self.server.managed_stats.history_edits)

    def sequence_limit(self) -> int:
        """The longest sequence sent: ``max_token_length``, or the trainer's when smaller."""
        limits = [self.config.max_token_length, self.context.max_token_len]
        return min((n for n in limits if n > 0), default=-1)

    def fit(self, node: SequenceNode, episode: AgentEpisode) -> SequenceNode:
        """``node``, cut to ``sequence_limit()`` when longer (counted; see the module docstring)."""
        limit = self.sequence_limit()
        cut = cut_to_length(node, limit)
        if cut is None:
            return node
        self.tally.count(
            "truncated sequences",
            None,
            f"a {len(node.tokens)}-token sequence ({episode.outcome}, {episode.turns} turn(s)) cut "
            f"to {limit} tokens and marked overlong",
        )
        return cut

    async def collect_trajectories(self, item: Item) -> tuple[Any, list[Item]]:
        """``group_size`` episodes at once; every node of each is a sequence with its reward."""
        episodes = await asyncio.gather(
            *(self.play(item, self.settings.temperature) for _ in range(self.config.group_size))
        )
        sampled = set().union(*(e.temperatures for e in episodes))
        params = {"temperature": sampled.pop()} if len(sampled) == 1 else None
        group = self.group_builder(generation_params=params)
        for episode in episodes:
            self.count(episode)
            for node, problem in zip(episode.nodes, episode.problems, strict=True):
                if node.weights_versions is not None:
                    note_versions([(node.weights_versions[0], node.weights_versions[1])])
                over = {"episode": episode.record(), "token_exact": problem is None}
                group.add_node(self.fit(node, episode), episode.reward, overrides=over)
        if not len(group):
            return None, []
        if len(group) != self.config.group_size:  # a node per turn, or an episode with none
            group.group_overrides["group_size"] = len(group)
        return group.build(), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """The ``eval_items()`` played once each at ``--agent.eval_temperature``: eval/reward, the
        outcomes' shares, one sample per episode."""
        from atroposlib.envkit.evaluation import evaluate_items, report_eval

        start = time.time()
        temperature = self.settings.eval_temperature

        async def play(item: Item) -> dict[str, Any]:
            return (await self.play(item, temperature)).record()

        samples = await evaluate_items(self, list(self.eval_items()), play)
        n = max(1, len(samples))
        metrics = {"eval/reward": sum(s["reward"] or 0.0 for s in samples) / n}
        for kind in OUTCOMES:
            share = sum(s["outcome"] == kind for s in samples) / n
            metrics[f"eval/outcome_{kind.replace(' ', '_')}"] = share
        await report_eval(
            self,
            metrics,
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": temperature},
        )

    async def shutdown(self) -> None:
        """Stop the persistent agent program and the in-process proxy. Not ``cleanup()``: the
        runtime calls that after every item (Atropos's rule). At the process's exit both go by
        themselves (the program's stdin closes; the proxy's thread is a daemon)."""
        program = getattr(self, "program", None)
        if program is not None:
            await program.close()
        client = getattr(self, "client", None)
        if client is not None:
            await client.aclose()
        if getattr(self, "host", None) is not None:
            self.host.stop()  # type: ignore[union-attr]


__all__ = [
    "OUTCOMES",
    "AgentEpisode",
    "AgentHarnessConfig",
    "AgentHarnessEnv",
    "AgentSettings",
    "classify",
    "cut_to_length",
]

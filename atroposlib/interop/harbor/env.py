"""``HarborEnv``: Harbor tasks trained through atroposlib, an episode a trial with a ``shell`` tool.

    python -m atroposlib.interop.harbor process --harbor.tasks environments/harbor_tasks/train \\
        --env.tokenizer_name MODEL --openai.base_url http://127.0.0.1:9001/v1 --openai.server_type vllm

Items are the tasks under ``--harbor.tasks`` (every one in a shuffled order, ``--env.seed``, then
again). An episode (``episode.ShellEpisode``) starts a sandbox for the task (``--harbor.sandbox``:
``host``, bubblewrap on this machine, or ``podman``, Harbor's own runtime), gives the model the
instruction and a ``shell`` tool, runs each call in the sandbox, and when the model ends its turn
without a call (or a limit ends the episode) runs the task's own verifier: the episode's score is the
reward it wrote. The limits are the task's where ``task.toml`` sets them (``[agent].timeout_sec``,
``[metadata.limits]``), else the ``--harbor.*`` flags.

The whole episode is one ``managed_server`` session with the Hermes tool parser, as in
``environments/calculator_tool_env.py``: the trained sequence is the server's own token ids
(generated ones trained; system, instruction, tool results and template tokens masked), checked
turn by turn against what the server saw and generated (a difference is a drift,
``train/token_drifts``, and the sequence's ``overrides`` say ``token_exact: false``).

Nothing is silent. A sandbox that refuses the task, fails to start or breaks, and a verifier that
crashes, times out or writes no reward, make the episode's reward unavailable (never 0: the
trainer masks it), counted in ``harbor/reward_unavailable/<kind>`` and logged once per kind; how each
episode's agent part ended is counted in ``train/outcome/<outcome>``; commands killed at their time
limit in ``harbor/commands_timed_out``. A task the chosen sandbox cannot run is refused at start-up
with one line, and left out (all refused: a ``ConfigError``).
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from atroposlib.envkit.chat import episode_node
from atroposlib.envkit.evaluation import evaluate_items, report_eval
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.tally import Tally
from atroposlib.envkit.token_check import TurnIds, exactness_problem
from atroposlib.envkit.tool_calls import template_renders_tools, tool_schema_problem
from atroposlib.envs.base import BaseEnv, ScoredDataItem
from atroposlib.errors import ConfigError, SandboxFailure
from atroposlib.groups import node_overlong
from atroposlib.interop.harbor.bwrap import CommandLimits
from atroposlib.interop.harbor.episode import (
    OUTCOMES,
    SHELL_TOOL,
    ShellEpisode,
    shell_system_prompt,
)
from atroposlib.interop.harbor.host_sandbox import make_trial_dir
from atroposlib.interop.harbor.sandbox import Sandbox
from atroposlib.interop.harbor.sandboxes import SANDBOXES
from atroposlib.interop.harbor.settings import HarborEnvConfig, HarborSettings
from atroposlib.interop.harbor.task import HarborTask, find_tasks
from atroposlib.interop.turns import require_exact_tokens
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)
PLAIN_SYSTEM_PROMPT = (
    "Use the shell tool to do the task. When it is done, reply without a tool call."
)


class HarborConfig(HarborEnvConfig):
    seed: int = Field(0, description="Seed of the order the training tasks are played in.")


class HarborEnv(BaseEnv):
    """Plays Harbor tasks with our policy (see the module docstring)."""

    name = "harbor"
    env_config_cls = HarborConfig
    config_init = local_defaults(
        group_size=8, max_token_length=1024, batch_size=32, include_messages=True
    )

    @property
    def cfg(self) -> HarborConfig:
        """This run's config (``--env.*`` and ``--harbor.*``)."""
        config = self.config
        if not isinstance(config, HarborConfig):
            raise TypeError(f"{type(self).__name__} needs a HarborConfig, got {type(config)}")
        return config

    @property
    def harbor(self) -> HarborSettings:
        """This run's ``--harbor.*`` section."""
        return self.cfg.harbor

    async def setup(self) -> None:
        s = self.harbor
        if not s.tasks.strip():
            raise ConfigError(
                "--harbor.tasks is required (a Harbor task folder or a folder of them)"
            )
        require_exact_tokens(self.server, "Harbor")
        self.sandbox_cls: type[Sandbox] = SANDBOXES[s.sandbox]
        missing = self.sandbox_cls.missing()
        if missing:
            raise ConfigError(f"--harbor.sandbox {s.sandbox}: {missing}")
        self.tally = Tally(self.set_metric)
        self.failures = Tally(self.set_metric, prefix="harbor")
        self.tasks = self._playable(find_tasks(s.tasks), "--harbor.tasks")
        self.eval_tasks = (
            self._playable(find_tasks(s.eval_tasks), "--harbor.eval_tasks")
            if s.eval_tasks.strip()
            else self.tasks
        )
        problem = tool_schema_problem(SHELL_TOOL)
        if problem:
            raise ConfigError(f"{self.name}: {problem}")
        self.schemas = [SHELL_TOOL.schema()]
        self.in_template = template_renders_tools(self.tokenizer, [SHELL_TOOL])
        self.system = PLAIN_SYSTEM_PROMPT if self.in_template else shell_system_prompt()
        self.server.tool_parser = "hermes"  # managed chat_completion(tools=...) parses Hermes calls
        self.trials_root = Path(s.trials_dir) if s.trials_dir else Path(tempfile.gettempdir())
        self.rng = random.Random(self.cfg.seed)
        self.order: list[HarborTask] = []
        for outcome in OUTCOMES:
            self.set_metric(self.tally.metric_name("outcome", outcome), 0)
        self.set_metric("train/token_drifts", 0)
        logger.info(
            "%s: %d training task(s), %d evaluation task(s), sandbox %s",
            self.name,
            len(self.tasks),
            len(self.eval_tasks),
            s.sandbox,
        )

    def _playable(self, tasks: list[HarborTask], flag: str) -> list[HarborTask]:
        """``tasks`` without those this env or sandbox cannot play (each refused with one line)."""
        kept = []
        for task in tasks:
            why = (
                "it is a multi-step task (steps), which this env does not play"
                if task.multi_step
                else self.sandbox_cls.refusal(task)
            )
            if why:
                logger.warning("%s: left out task %s: %s", flag, task.name, why)
                self.failures.count("refused tasks", None, quiet=True)
            else:
                kept.append(task)
        if not kept:
            raise ConfigError(f"{flag}: no task there can be played (each refused above)")
        return kept

    async def get_next_item(self) -> Item:
        if not self.order:
            self.order = list(self.tasks)
            self.rng.shuffle(self.order)
        return self.order.pop()

    # --- one episode ----------------------------------------------------------------------------
    def _limits(self, task: HarborTask) -> tuple[CommandLimits, int, float]:
        """(a command's limits, the turns, the wall time) of an episode of ``task``."""
        s, own = self.harbor, task.limits
        limits = CommandLimits(
            timeout_s=own.command_timeout_s or s.command_timeout_s,
            max_output_bytes=own.max_output_bytes or s.max_output_bytes,
        )
        return limits, own.max_turns or s.max_turns, own.agent_timeout_s or s.episode_timeout_s

    async def play(
        self, task: HarborTask, temperature: float, **request: Any
    ) -> tuple[ShellEpisode, Any, Optional[str]]:
        """One episode in its own sandbox and managed session: (episode, its node, drift or None)."""
        limits, max_turns, wall_s = self._limits(task)
        episode = ShellEpisode(task, self.system, max_turns, wrap_tool_results=not self.in_template)
        sandbox = self.sandbox_cls(task, make_trial_dir(self.trials_root, f"{task.name}-"), limits)
        try:
            await sandbox.start()
        except SandboxFailure as failure:
            await sandbox.stop()
            episode.unavailable(failure)
            return episode, None, None
        try:
            turns, node = await self._agent_part(
                episode, sandbox, limits, wall_s, temperature, request
            )
            if episode.failure is None:
                try:
                    episode.scored(await sandbox.verify())
                except SandboxFailure as failure:
                    episode.unavailable(failure)
        finally:
            await sandbox.stop()
        drift = exactness_problem(turns, node.tokens, node.masked_tokens) if node else None
        return episode, node, drift

    async def _agent_part(
        self,
        episode: ShellEpisode,
        sandbox: Sandbox,
        limits: CommandLimits,
        wall_s: float,
        temperature: float,
        request: dict[str, Any],
    ) -> tuple[list[TurnIds], Any]:
        """The model's turns until the episode is done; (the turns' ids, the tracked node)."""
        deadline = time.monotonic() + wall_s
        turns: list[TurnIds] = []

        async def run(command: str) -> Any:
            left = max(0.1, deadline - time.monotonic())
            return await sandbox.run(
                command, replace(limits, timeout_s=min(limits.timeout_s, left))
            )

        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            while not episode.done:
                if time.monotonic() >= deadline:
                    episode.finish("out of time", f"the agent's {wall_s:g} s were up")
                elif not self._room_for_a_turn(episode):
                    episode.finish(
                        "out of room",
                        f"another turn could pass {self.config.max_token_length} tokens",
                    )
                else:
                    completion = await managed.chat_completion(
                        messages=episode.messages,
                        tools=self.schemas,
                        n=1,
                        max_tokens=self.harbor.max_tokens_per_turn,
                        temperature=temperature,
                        **request,
                    )
                    choice = completion.choices[0]
                    turns.append(TurnIds.of(completion, choice))
                    errors = [e["error"] for e in getattr(choice.message, "tool_call_errors", [])]
                    raw = self._raw_text(choice.token_ids)
                    episode.take_reply(
                        raw, choice.message.content, choice.message.tool_calls, errors
                    )
                    if not episode.done:
                        try:
                            await episode.run_pending(run)
                        except SandboxFailure as failure:
                            episode.unavailable(failure)
            node = episode_node(managed) if turns else None
        return turns, node

    def _raw_text(self, ids: list[int]) -> str:
        """The text the model wrote (special tokens kept, its end-of-turn token not)."""
        body = ids[:-1] if ids and ids[-1] == self.tokenizer.eos_token_id else ids
        return str(self.tokenizer.decode(body, skip_special_tokens=False))

    def _room_for_a_turn(self, episode: ShellEpisode) -> bool:
        prompt = self.tokenizer.apply_chat_template(
            episode.transcript, tokenize=False, add_generation_prompt=True, tools=self.schemas
        )
        used = len(self.tokenizer.encode(prompt, add_special_tokens=False))
        return used + self.harbor.max_tokens_per_turn <= self.config.max_token_length

    # --- groups ---------------------------------------------------------------------------------
    async def collect_trajectory(
        self, item: HarborTask
    ) -> tuple[Optional[ScoredDataItem], list[Item]]:
        """One episode (the default ``collect_trajectories`` plays ``group_size`` of them at once)."""
        episode, node, drift = await self.play(item, self.harbor.temperature)
        self._count(episode, drift)
        if node is None:  # the sandbox failed before the first turn: nothing to train on
            return None, []
        grader = f"reward {episode.score}" if episode.score is not None else "reward unavailable"
        scored: ScoredDataItem = {
            "tokens": node.tokens,
            "masks": node.masked_tokens,
            "scores": episode.score,  # type: ignore[typeddict-item]  # None: unavailable
            "inference_logprobs": node.logprobs,
            "messages": episode.transcript  # type: ignore[typeddict-item]
            + [{"role": "grader", "content": f"{grader}; {episode.note}"}],
            "overrides": {"episode": episode.record(), "token_exact": drift is None},
            "overlong": node_overlong(node),
        }
        return scored, []

    def _count(self, episode: ShellEpisode, drift: Optional[str]) -> None:
        record = episode.record()
        if episode.score is not None:
            self.add_metric("train/reward", episode.score)
        self.add_metric("train/valid_tool_call_share", float(episode.valid_calls > 0))
        self.add_metric("train/turns", float(episode.turns))
        self.tally.count(
            "outcome",
            episode.outcome,
            f"{episode.task.name}: {episode.note}",
            quiet=episode.outcome == "finished",
        )
        if episode.failure is not None:
            self.failures.count(
                "reward unavailable", episode.failure, f"{episode.task.name}: {episode.note}"
            )
        if episode.commands_timed_out:
            self.failures.count(
                "commands timed out", None, f"in {record['task']}", n=episode.commands_timed_out
            )
        for kind in episode.tool_errors:
            self.tally.count("tool error", kind, f"in {episode.task.name}")
        if drift is not None:
            self.tally.count("token drifts", None, drift)

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """One greedy episode per evaluation task: eval/success (share with reward 1), eval/reward
        (mean over the scored ones), eval/reward_unavailable, eval/valid_tool_call_share, eval/turns."""
        start = time.time()

        async def play(task: HarborTask) -> dict[str, Any]:
            episode, _, _ = await self.play(task, self.harbor.eval_temperature, split="eval")
            return {**episode.record(), "messages": episode.transcript}

        samples = await evaluate_items(self, list(self.eval_tasks), play)
        n = max(1, len(samples))
        scored = [s["score"] for s in samples if s["score"] is not None]
        await report_eval(
            self,
            {
                "eval/success": sum(1 for v in scored if v >= 1.0) / n,
                "eval/reward": sum(scored) / max(1, len(scored)),
                "eval/reward_unavailable": float(n - len(scored)),
                "eval/valid_tool_call_share": sum(s["valid_tool_calls"] > 0 for s in samples) / n,
                "eval/turns": sum(s["turns"] for s in samples) / n,
            },
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": self.harbor.eval_temperature},
        )


__all__ = ["HarborConfig", "HarborEnv"]

"""Multi-turn tool use: multiplications the model cannot do in its head, solved with a ``calculator`` tool.

Each episode asks ``What is a * b?`` (``a`` in 10..999, ``b`` in 10..99). The model may call the
calculator in the Hermes format (``<tool_call>{"name": "calculator", "arguments": {"expression":
"347 * 28"}}</tool_call>``); the call runs and its result comes back as a ``tool`` turn; the episode ends
with the first reply that calls nothing, the answer. Reward 1.0 when the answer's last integer is
``a * b``, else 0.0. ``--env.held_out`` operand pairs (drawn by ``--env.seed``) are never trained on;
``evaluate`` plays them greedily.

It is the task of ``atropos-demo --model smollm2 --task calculator``, and it runs on the real multi-turn
path: the whole episode is one ``managed_server`` session with the Hermes tool parser
(``chat_completion(tools=...)`` returns ``message.tool_calls``; the assistant turns go back as
``tool_calls``, which the managed server turns into the model's exact text), so the trained sequence
is the server's own token ids, generated ones trained, tool and template tokens masked.

Nothing is silent (counters are env metrics under ``train/``, each kind logged once at WARNING):
* a malformed call (bad JSON, no name, an ``arguments`` that is not an object, an unclosed tag: the
  managed server's ``message.tool_call_errors``, which it also counts as ``managed/tool_call_parse_errors``)
  ends the episode with 0 (``train/outcome/malformed_tool_call``);
* a tool that raises sends ``{"error": ...}`` back to the model as its response and goes on
  (``train/tool_error/<ExceptionName>``);
* ``--env.max_turns`` assistant turns that all call tools end the episode with 0
  (``train/outcome/past_max_turns``), as does a turn that could pass ``--env.max_token_length``
  (``train/outcome/out_of_room``);
* every episode's trained sequence is checked against the ids the server saw and generated, turn by
  turn (``atroposlib.envkit.token_check``); a difference is a drift (``train/token_drifts``) and the
  sequence's ``overrides`` say so (``token_exact``);
* a tool schema the Hermes format cannot carry, or a chat template that cannot render a tool turn, is
  one ``ConfigError`` line at start-up.

Chat templates that render ``tools=`` themselves (Qwen2.5 and other Hermes templates) get the tools and
a one-line system prompt; templates that ignore them (SmolLM2's ChatML) get the tools listed in the
system prompt and ``<tool_response>`` tags around results; the choice is logged once at start-up.

    python environments/calculator_tool_env.py serve --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --openai.server_type vllm --openai.model_name policy
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, ClassVar, Optional

from pydantic import Field, model_validator

from atroposlib.envkit.calculator_task import (
    OUTCOMES,
    PLAIN_SYSTEM_PROMPT,
    CalcProblem,
    Episode,
    gold_transcript,
    split_problems,
    tool_system_prompt,
)
from atroposlib.envkit.chat import episode_node, require_room
from atroposlib.envkit.evaluation import evaluate_items, report_eval
from atroposlib.envkit.rollouts import SamplingConfig
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.tally import Tally
from atroposlib.envkit.token_check import TurnIds, exactness_problem
from atroposlib.envkit.tool_calls import TOOLBOX, Tool, template_renders_tools, tool_schema_problem
from atroposlib.envs.base import BaseEnv, ScoredDataItem
from atroposlib.errors import ConfigError
from atroposlib.groups import node_overlong
from atroposlib.type_definitions import Item

logger = logging.getLogger(__name__)


class CalculatorToolConfig(SamplingConfig):
    max_turns: int = Field(
        3, ge=1, description="Assistant turns before an episode is cut (score 0)."
    )
    max_tokens_per_turn: int = Field(48, ge=1, description="Reply budget of one assistant turn.")
    held_out: int = Field(
        64, ge=0, description="Operand pairs kept out of training for evaluate()."
    )
    seed: int = Field(0, description="Seed of the held-out split and of the training questions.")
    min_a: int = Field(10, ge=0, description="Smallest first operand.")
    max_a: int = Field(999, ge=0, description="Largest first operand.")
    min_b: int = Field(10, ge=0, description="Smallest second operand.")
    max_b: int = Field(99, ge=0, description="Largest second operand.")

    @model_validator(mode="after")
    def _ranges(self) -> CalculatorToolConfig:
        if self.max_a < self.min_a or self.max_b < self.min_b:
            raise ValueError("operand ranges need min <= max (min_a/max_a, min_b/max_b)")
        return self


class CalculatorToolEnv(BaseEnv):
    name = "calculator_tool"
    env_config_cls = CalculatorToolConfig
    config_init = local_defaults(
        group_size=8, max_token_length=320, batch_size=32, temperature=1.0, include_messages=True
    )
    #: the tools offered (a subclass may offer more; each schema is checked at start-up)
    tools: ClassVar[dict[str, Tool]] = {"calculator": TOOLBOX["calculator"]}

    async def setup(self) -> None:
        cfg = self.config
        for tool in self.tools.values():
            problem = tool_schema_problem(tool)
            if problem:
                raise ConfigError(f"{self.name}: {problem}")
        try:
            self.split = split_problems(
                cfg.held_out, cfg.seed, (cfg.min_a, cfg.max_a), (cfg.min_b, cfg.max_b)
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.schemas = [t.schema() for t in self.tools.values()]
        self.in_template = template_renders_tools(self.tokenizer, list(self.tools.values()))
        self.system = (
            PLAIN_SYSTEM_PROMPT
            if self.in_template
            else tool_system_prompt(list(self.tools.values()))
        )
        logger.info(
            "%s: the chat template %s; tool results go back %s",
            self.name,
            "renders the tools itself"
            if self.in_template
            else "ignores tools=, so the system prompt lists them",
            "as the template wraps them" if self.in_template else "inside <tool_response> tags",
        )
        gold = gold_transcript(
            self.split.train_problem(random.Random(0)), self.system, not self.in_template
        )
        try:
            self.tokenizer.apply_chat_template(gold, tokenize=False, tools=self.schemas)
        except Exception as exc:
            raise ConfigError(
                f"{self.name}: the chat template cannot render a tool turn: {exc}"
            ) from None
        room = self.config.max_turns * self.config.max_tokens_per_turn
        require_room(self.tokenizer, gold[:2], self.config.max_token_length, minimum=min(room, 128))
        self.server.tool_parser = "hermes"  # managed chat_completion(tools=...) parses Hermes calls
        self.rng = random.Random(cfg.seed + 1)
        self.tally = Tally(self.set_metric)
        for outcome in OUTCOMES:
            self.set_metric(self.tally.metric_name("outcome", outcome), 0)
        self.set_metric("train/token_drifts", 0)

    async def get_next_item(self) -> Item:
        return self.split.train_problem(self.rng)

    def new_episode(self, problem: CalcProblem) -> Episode:
        return Episode(
            problem, self.system, self.config.max_turns, wrap_tool_results=not self.in_template
        )

    async def play(
        self, problem: CalcProblem, temperature: float, **request: Any
    ) -> tuple[Episode, Any, Optional[str]]:
        """Play one episode in one managed session: (episode, its tracked node, drift or None)."""
        episode = self.new_episode(problem)
        turns: list[TurnIds] = []
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            while not episode.done:
                if not self._room_for_a_turn(episode):
                    episode.finish(
                        "out of room",
                        f"another turn could pass {self.config.max_token_length} tokens",
                    )
                    break
                completion = await managed.chat_completion(
                    messages=episode.messages,
                    tools=self.schemas,
                    n=1,
                    max_tokens=self.config.max_tokens_per_turn,
                    temperature=temperature,
                    **request,
                )
                choice = completion.choices[0]
                turns.append(TurnIds.of(completion, choice))
                errors = [e["error"] for e in getattr(choice.message, "tool_call_errors", [])]
                raw = self._raw_text(choice.token_ids)
                episode.take_reply(raw, choice.message.content, choice.message.tool_calls, errors)
                if not episode.done:
                    episode.run_pending(self.tools)
            node = episode_node(managed) if turns else None
        drift = (
            exactness_problem(turns, node.tokens, node.masked_tokens) if node is not None else None
        )
        return episode, node, drift

    async def collect_trajectory(
        self, item: CalcProblem
    ) -> tuple[Optional[ScoredDataItem], list[Item]]:
        """One episode (the default ``collect_trajectories`` runs ``group_size`` of them at once)."""
        episode, node, drift = await self.play(item, self.config.temperature)
        self._count(episode, drift)
        if node is None:  # not even the first turn fitted (require_room makes this rare)
            return None, []
        scored: ScoredDataItem = {
            "tokens": node.tokens,
            "masks": node.masked_tokens,
            "scores": episode.score,
            "inference_logprobs": node.logprobs,
            "messages": episode.transcript + [{"role": "grader", "content": episode.note}],
            "overrides": {"episode": episode.record(), "token_exact": drift is None},
            "overlong": node_overlong(node),  # the last reply was cut at max_tokens_per_turn
        }
        return scored, []

    def _raw_text(self, ids: list[int]) -> str:
        """The text the model wrote (special tokens kept, its end-of-turn token not)."""
        body = ids[:-1] if ids and ids[-1] == self.tokenizer.eos_token_id else ids
        return self.tokenizer.decode(body, skip_special_tokens=False)

    def _room_for_a_turn(self, episode: Episode) -> bool:
        prompt = self.tokenizer.apply_chat_template(
            episode.transcript, tokenize=False, add_generation_prompt=True, tools=self.schemas
        )
        used = len(self.tokenizer.encode(prompt, add_special_tokens=False))
        return used + self.config.max_tokens_per_turn <= self.config.max_token_length

    def _count(self, episode: Episode, drift: Optional[str]) -> None:
        record = episode.record()
        self.add_metric("train/success", episode.score)
        self.add_metric("train/valid_tool_call_share", float(episode.valid_calls > 0))
        self.add_metric("train/turns", float(episode.turns))
        expected = episode.outcome in ("correct", "wrong answer")
        self.tally.count(
            "outcome", episode.outcome, f"{record['question']} -> {episode.note}", quiet=expected
        )
        for kind in episode.tool_errors:
            self.tally.count("tool error", kind, f"in {record['question']}")
        if drift is not None:
            self.tally.count("token drifts", None, drift)

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Greedy episodes on the held-out questions: eval/success, eval/valid_tool_call_share, eval/turns."""
        start = time.time()

        async def play(problem: CalcProblem) -> dict[str, Any]:
            episode, _, _ = await self.play(problem, 0.0, split="eval")
            return episode.record()

        samples = await evaluate_items(self, list(self.split.held_out), play)
        n = max(1, len(samples))
        await report_eval(
            self,
            {
                "eval/success": sum(s["score"] for s in samples) / n,
                "eval/valid_tool_call_share": sum(s["valid_tool_calls"] > 0 for s in samples) / n,
                "eval/turns": sum(s["turns"] for s in samples) / n,
            },
            task_name=self.name,
            samples=samples,
            start_time=start,
            end_time=time.time(),
            generation_parameters={"temperature": 0.0},
        )


if __name__ == "__main__":
    CalculatorToolEnv.cli()

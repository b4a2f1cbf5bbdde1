"""Multi-turn tool calling: the model's Hermes tool calls are executed and the results fed back.

Each episode: the system prompt lists the tools; the user asks something that needs two calls (a
city's temperature, then a unit conversion). Every assistant turn is parsed: well-formed calls run
against the built-in tool box and come back as a ``tool`` message holding ``<tool_response>...``;
the episode ends when the model writes ``<answer>...</answer>``, after ``max_turns`` (score 0,
counted as ``train/episodes_past_max_turns``), or at the first malformed call (score 0, the reason
kept as a ``grader`` note and counted). Tool errors (unknown tool,
bad arguments) are fed back to the model as the tool's response, like a real API would.

Token-exact tracking: the whole episode runs inside one ``managed_server`` context, so the final node's
tokens are exactly what was generated plus the tool/user turns in between; only generated tokens are
trained on (tool output is masked). Reward per episode: 1.0 for the right number (within 0.01), else 0.

    python environments/tool_calling_multiturn_env.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

import random
from typing import Optional

from pydantic import Field

from atroposlib.envkit.chat import chat, episode_node, require_room
from atroposlib.envkit.rollouts import SamplingConfig
from atroposlib.envkit.servers import local_defaults
from atroposlib.envkit.text_tasks import extract_answer_tag
from atroposlib.envkit.tool_calls import (
    TOOLBOX,
    execute_call,
    hermes_system_prompt,
    multi_turn_task,
    parse_tool_calls,
)
from atroposlib.envs.base import BaseEnv, ScoredDataItem
from atroposlib.type_definitions import Item


class MultiTurnToolConfig(SamplingConfig):
    max_turns: int = Field(
        default=4, ge=1, description="Assistant turns before the episode is cut."
    )
    max_tokens_per_turn: int = Field(
        default=512, ge=1, description="Completion budget of one turn."
    )
    seed: int = Field(default=0, description="Seed of the task generator.")


class MultiTurnToolEnv(BaseEnv):
    name = "tool_calling_multiturn"
    env_config_cls = MultiTurnToolConfig
    config_init = local_defaults(group_size=8, max_token_length=4096, batch_size=16)

    async def setup(self) -> None:
        self.rng = random.Random(self.config.seed)
        self.system = hermes_system_prompt(list(TOOLBOX.values()))
        require_room(self.tokenizer, chat(self.system, "?"), self.config.max_token_length)
        self.malformed = 0
        self.past_max_turns = 0
        self.set_metric("train/malformed_tool_calls", 0)
        self.set_metric("train/episodes_past_max_turns", 0)

    async def get_next_item(self) -> Item:
        return multi_turn_task(self.rng)

    async def collect_trajectory(self, item: Item) -> tuple[Optional[ScoredDataItem], list[Item]]:
        """One episode (the default ``collect_trajectories`` runs ``group_size`` of them concurrently)."""
        messages = chat(self.system, item["question"])
        score, note = 0.0, f"no <answer> after {self.config.max_turns} turns"
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            for _ in range(self.config.max_turns):  # the else: no answer within max_turns
                completion = await managed.chat_completion(
                    messages=messages,
                    n=1,
                    max_tokens=self.config.max_tokens_per_turn,
                    temperature=self.config.temperature,
                )
                reply = completion.choices[0].message.content or ""
                messages.append({"role": "assistant", "content": reply})
                parsed = parse_tool_calls(reply)
                if parsed.errors:
                    self.malformed += len(parsed.errors)
                    self.set_metric("train/malformed_tool_calls", self.malformed)
                    note = "malformed tool call: " + "; ".join(parsed.errors)
                    break
                if not parsed.calls:
                    answer = extract_answer_tag(reply)
                    ok = answer is not None and _close(answer, item["answer"])
                    score, note = (
                        (1.0, "correct")
                        if ok
                        else (0.0, f"answer {answer!r}, expected {item['answer']}")
                    )
                    break
                responses = [execute_call(call)[1] for call in parsed.calls]
                tool_turn = "\n".join(f"<tool_response>{r}</tool_response>" for r in responses)
                used = len(episode_node(managed).tokens) + len(self.tokenizer.encode(tool_turn))
                if used + 16 + self.config.max_tokens_per_turn > self.config.max_token_length:
                    note = "stopped: another turn could pass max_token_length"
                    break
                messages.append({"role": "tool", "content": tool_turn})
            else:
                self.past_max_turns += 1
                self.set_metric("train/episodes_past_max_turns", self.past_max_turns)
            node = episode_node(managed)
        scored: ScoredDataItem = {
            "tokens": node.tokens,
            "masks": node.masked_tokens,
            "scores": score,
            "inference_logprobs": node.logprobs,
            "messages": messages + [{"role": "grader", "content": note}],
            "overlong": node.overlong,
        }
        return scored, []


def _close(text: str, expected: float) -> bool:
    try:
        return abs(float(text) - expected) <= 0.01
    except ValueError:
        return False


if __name__ == "__main__":
    MultiTurnToolEnv.cli()

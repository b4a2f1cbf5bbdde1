"""An Atropos-style blackjack-like env that acts through tool calls (``parse_tool_call``).

The model answers with ``<tool_call>{"name": "hit"|"stand", "arguments": {}}</tool_call>``; a
malformed call loses the hand. The best alternative of each group is picked with Atropos's
``select_best_index`` (reward first, shorter reply on ties) and logged.
"""

import logging
import random
from typing import Optional

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.best_of_n_selection import select_best_index
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from atroposlib.utils.tool_call_parser import parse_tool_call

logger = logging.getLogger(__name__)

TOOLS = [
    {"type": "function", "function": {"name": "hit", "parameters": {}}},
    {"type": "function", "function": {"name": "stand", "parameters": {}}},
]


class BlackjackToolEnv(BaseEnv):
    name = "blackjack_compat"

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        return BaseEnvConfig(
            group_size=4,
            use_wandb=False,
            total_steps=3,
            batch_size=8,
            max_token_length=512,
            steps_per_eval=0,
            max_num_workers=2,
        ), [APIServerConfig(model_name="tiny", base_url="http://localhost:9001/v1", api_key="x")]

    async def setup(self):
        self.rng = random.Random(1)

    async def get_next_item(self) -> Item:
        return {"hand": self.rng.randint(12, 20), "dealer": self.rng.randint(17, 21)}

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        chat = [
            {"role": "system", "content": "Play blackjack. Call hit or stand."},
            {"role": "user", "content": f"You hold {item['hand']}. Dealer shows 10."},
        ]
        out = await self.server.chat_completion(messages=chat, n=self.config.group_size)
        scored = ScoredDataGroup()
        scored["tokens"], scored["masks"], scored["scores"], scored["messages"] = [], [], [], []
        for choice in out.choices:
            text = choice.message.content or ""
            tool, _args, is_error = parse_tool_call(text, TOOLS, ["tool_call"])
            total = item["hand"] + (self.rng.randint(1, 10) if tool == "hit" else 0)
            if is_error:
                reward = -1.0
            elif total > 21:
                reward = -0.5
            else:
                reward = 1.0 if total > item["dealer"] else 0.0
            full = chat + [{"role": "assistant", "content": text}]
            tok = tokenize_for_trainer(self.tokenizer, full)
            scored["tokens"].append(tok["tokens"])
            scored["masks"].append(tok["masks"])
            scored["scores"].append(reward)
            scored["messages"].append(full)
        best = select_best_index(scored["scores"], [len(t) for t in scored["tokens"]])
        logger.info("best alternative: %d (score %.2f)", best, scored["scores"][best])
        return scored, []


if __name__ == "__main__":
    BlackjackToolEnv.cli()

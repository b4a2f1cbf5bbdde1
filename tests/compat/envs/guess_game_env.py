"""An Atropos-style multi-turn game env (number guessing) annotated with ``GameHistory``.

Written as an Atropos env file would be: only the imports name atroposlib. Each rollout is a game
of up to three turns; the env answers "higher"/"lower"; the reward is 1 for a win, discounted
per extra turn. Thinking blocks are truncated before a reply goes back into the next prompt.
"""

import random
from typing import Optional

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import GameHistory, GameStep, Item, Message, number
from atroposlib.utils.message_history_utils import (
    ensure_trajectory_token_limit,
    truncate_thinking,
)
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


class GuessGameEnv(BaseEnv):
    name = "guess_game_compat"

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        return BaseEnvConfig(
            group_size=2,
            use_wandb=False,
            total_steps=2,
            batch_size=4,
            max_token_length=1024,
            steps_per_eval=0,
            max_num_workers=2,
        ), [APIServerConfig(model_name="tiny", base_url="http://localhost:9001/v1", api_key="x")]

    async def setup(self):
        self.rng = random.Random(0)

    async def get_next_item(self) -> Item:
        return {"secret": self.rng.randint(1, 9)}

    async def play(self, secret: int) -> tuple[list[Message], GameHistory, number]:
        messages: list[Message] = [
            {"role": "system", "content": "Guess my number from 1 to 9.", "reward": None},
            {"role": "user", "content": "Your first guess?", "reward": None},
        ]
        history: GameHistory = []
        reward: number = 0.0
        for turn in range(3):
            out = await self.server.chat_completion(
                messages=[{"role": m["role"], "content": m["content"]} for m in messages],
                n=1,
                max_tokens=96,
            )
            reply = truncate_thinking(out.choices[0].message.content or "", self.tokenizer, 4)
            digits = [int(c) for c in reply if c.isdigit()]
            guess = digits[0] if digits else 0
            done = guess == secret or turn == 2
            reward = (1.0 / (turn + 1)) if guess == secret else 0.0
            step: GameStep = {
                "step": turn,
                "agent_id": "player",
                "observation": {"raw": {"turn": turn}, "rendered": messages[-1]["content"]},
                "action": reply,
                "reward": reward,
                "done": done,
                "info": {"guess": guess},
            }
            history.append(step)
            messages.append({"role": "assistant", "content": reply, "reward": reward})
            if done:
                break
            hint = "higher" if guess < secret else "lower"
            messages.append({"role": "user", "content": f"No, {hint}.", "reward": None})
        return messages, history, reward

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        scored = ScoredDataGroup()
        scored["tokens"], scored["masks"], scored["scores"], scored["messages"] = [], [], [], []
        for _ in range(self.config.group_size):
            messages, history, reward = await self.play(item["secret"])
            chat = [{"role": m["role"], "content": m["content"]} for m in messages]
            tok = tokenize_for_trainer(self.tokenizer, chat, train_on_all_assistant_turns=True)
            scored["tokens"].append(tok["tokens"])
            scored["masks"].append(tok["masks"])
            scored["scores"].append(float(reward) + 0.01 * len(history))
            scored["messages"].append(chat)
        kept = ensure_trajectory_token_limit([scored], self.tokenizer, self.config.max_token_length)
        return (kept[0] if kept else None), []


if __name__ == "__main__":
    GuessGameEnv.cli()

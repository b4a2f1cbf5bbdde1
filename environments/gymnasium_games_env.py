"""Gymnasium games as multi-turn text play: Blackjack and Taxi (``--env.game blackjack|taxi``).

Each item is a seed; the ``group_size`` episodes of a group start from the same seed (same first state,
same card order), so their rewards are comparable. An episode is a conversation: the system prompt holds
the rules, each user turn the rendered state, each assistant turn one move as ``<action>name</action>``.
The whole episode runs inside one ``managed_server`` context, so the final node holds the exact tokens
that were generated (trained on) and the observations in between (masked) — no re-tokenization drift.

Reward per episode: the sum of Gymnasium's rewards (Blackjack: +1 win, 0 draw, -1 loss; Taxi: -1 per move,
+20 for the delivery, -10 for an illegal pickup/drop-off) times ``reward_scale``. An unreadable or unknown
move ends the episode with ``invalid_move_penalty`` added, and the reason is kept as a ``grader`` note.

    python environments/gymnasium_games_env.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2 --env.game taxi
"""

from typing import Literal, Optional

from pydantic import Field

from atroposlib.envkit.chat import episode_node
from atroposlib.envkit.games import GAMES
from atroposlib.envkit.rollouts import SamplingConfig
from atroposlib.envkit.servers import local_defaults
from atroposlib.envs.base import BaseEnv, ScoredDataItem
from atroposlib.type_definitions import Item


class GymGameConfig(SamplingConfig):
    game: Literal["blackjack", "taxi"] = Field(
        default="blackjack", description="Which Gymnasium game to play."
    )
    max_turns: int = Field(default=20, ge=1, description="Moves before the episode is cut.")
    max_tokens_per_turn: int = Field(
        default=256, ge=1, description="Completion budget of one move."
    )
    invalid_move_penalty: float = Field(
        default=-1.0, description="Added to the reward on an invalid move."
    )
    reward_scale: float = Field(
        default=1.0, description="Multiplies the episode reward (e.g. 0.05 for Taxi)."
    )
    seed: int = Field(default=0, description="First episode seed; items count up from it.")


class GymGameEnv(BaseEnv):
    name = "gymnasium_games"
    env_config_cls = GymGameConfig
    config_init = local_defaults(group_size=8, max_token_length=8192, batch_size=16)

    async def setup(self) -> None:
        self.next_seed = self.config.seed

    async def get_next_item(self) -> Item:
        self.next_seed += 1
        return {"seed": self.next_seed - 1}

    async def collect_trajectory(self, item: Item) -> tuple[Optional[ScoredDataItem], list[Item]]:
        cfg = self.config
        game = GAMES[cfg.game]()
        messages = [
            {"role": "system", "content": game.rules},
            {"role": "user", "content": game.reset(seed=item["seed"])},
        ]
        total, note = 0.0, f"cut after {cfg.max_turns} moves"
        try:
            async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
                for _ in range(cfg.max_turns):
                    completion = await managed.chat_completion(
                        messages=messages,
                        n=1,
                        max_tokens=cfg.max_tokens_per_turn,
                        temperature=cfg.temperature,
                    )
                    move = completion.choices[0].message.content or ""
                    messages.append({"role": "assistant", "content": move})
                    step = game.step(move)
                    total += step.reward
                    if step.invalid_reason:
                        total += cfg.invalid_move_penalty
                        note = f"invalid move: {step.invalid_reason}"
                        break
                    if step.done:
                        note = step.observation
                        break
                    used = len(episode_node(managed).tokens) + len(
                        self.tokenizer.encode(step.observation)
                    )
                    if used + 16 + cfg.max_tokens_per_turn > cfg.max_token_length:
                        note = "stopped: another move could pass max_token_length"
                        break
                    messages.append({"role": "user", "content": step.observation})
                node = episode_node(managed)
        finally:
            game.close()
        self.add_metric("train/episode_reward", total)
        scored: ScoredDataItem = {
            "tokens": node.tokens,
            "masks": node.masked_tokens,
            "scores": total * cfg.reward_scale,
            "inference_logprobs": node.logprobs,
            "messages": messages + [{"role": "grader", "content": note}],
        }
        return scored, []


if __name__ == "__main__":
    GymGameEnv.cli()

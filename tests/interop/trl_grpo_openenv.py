"""TRL's GRPOTrainer trains on an Atropos env served by ``serve-openenv`` (runs in TRL's venv, on CPU).

    python trl_grpo_openenv.py ENV_URL MODEL_DIR OUT_DIR

TRL's OpenEnv integration (``environment_factory``): each rollout gets an ``AtroposEpisode``, whose
``reset`` opens an episode of the served env through openenv's ``GenericEnvClient`` (its prompt becomes
the user turn) and whose reply is the model's completion, sent as the step action by the reward function;
the env's own score is the reward. Episodes of one GRPO group reset with the same ``seed`` (a dataset
column), so the served env gives them the same item. Prints one JSON line: the optimizer steps, TRL's
logged history and every episode (prompt, reply, reward).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

from datasets import Dataset
from openenv.core.generic_client import GenericEnvClient
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

ENV_URL, MODEL_DIR, OUT_DIR = sys.argv[1:4]
EPISODES: list[dict[str, Any]] = []


class AtroposEpisode:
    """One rollout on the served Atropos env (one OpenEnv session, reset for every rollout)."""

    def __init__(self) -> None:
        self._env = GenericEnvClient(base_url=ENV_URL).sync()
        self._env.connect()
        self._prompt = ""

    def reset(self, seed: Optional[int] = None, **kwargs: Any) -> str:
        result = self._env.reset(seed=seed)
        self._prompt = result.observation["prompt"]
        return self._prompt  # TRL appends it to the dataset's user turn

    def _reply(self, text: str) -> Optional[float]:
        """Send the model's reply; the env's score once the episode is done (one reply per episode)."""
        result = self._env.step({"message": text})
        reward = result.reward if result.done else None
        EPISODES.append({"prompt": self._prompt, "reply": text, "reward": reward})
        return reward


def env_reward(completions: list[Any], environments: list[AtroposEpisode], **kwargs: Any) -> list:
    return [env._reply(c[-1]["content"]) for c, env in zip(completions, environments, strict=True)]


tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForCausalLM.from_pretrained(MODEL_DIR)
# one row per GRPO group: the seed picks the env's item; the env's prompt is the whole user turn
dataset = Dataset.from_dict(
    {"prompt": [[{"role": "user", "content": ""}]] * 4, "seed": [0, 1, 2, 3]}
)
args = GRPOConfig(
    output_dir=OUT_DIR,
    use_vllm=False,  # transformers generation on CPU
    use_cpu=True,
    max_steps=2,
    per_device_train_batch_size=8,
    num_generations=4,  # 2 groups of 4 episodes per step
    max_completion_length=4,
    learning_rate=1e-4,
    logging_steps=1,
    report_to="none",
    save_strategy="no",
    seed=0,
)
trainer = GRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=env_reward,
    args=args,
    train_dataset=dataset,
    environment_factory=AtroposEpisode,
)
trainer.train()
print(
    json.dumps(
        {
            "global_step": trainer.state.global_step,
            "log_history": trainer.state.log_history,
            "episodes": EPISODES,
        }
    )
)

"""An Atropos-style env that leans on the Atropos names ``dir()`` leaves out (as gsm8k_server does).

Its ``__init__`` assigns ``self.eval_metrics``, ``self.rollouts_for_wandb`` and
``self.completion_lengths`` after ``super().__init__``; it overrides ``wandb_log``,
``add_rollouts_for_wandb``, ``create_rollout_table``, ``save_checkpoint``, ``load_checkpoint`` and
``cli``, each calling ``super()``; it reads ``self.curr_step``, ``self.wandb_prepend`` and
``self.max_token_len``, and reports its evaluation with ``self.evaluate_log``. Each override appends
one JSON line naming itself to the file ``$HOOK_LOG`` names (when set), so a test can see it ran.
"""

import json
import os
import time
from typing import Optional

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

QUESTIONS = [("What is 1+1?", "2"), ("What is 2+2?", "4"), ("What is 3+3?", "6")]


def note(hook: str, **fields) -> None:
    """Record that ``hook`` ran (one JSON line in ``$HOOK_LOG``)."""
    path = os.environ.get("HOOK_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"hook": hook, **fields}) + "\n")


class AtroposNamesEnv(BaseEnv):
    name = "atropos_names_compat"

    def __init__(self, config, server_configs, slurm=False, testing=False):
        super().__init__(config, server_configs, slurm, testing)
        self.percent_correct_buffer = list()
        self.eval_metrics = list()
        self.rollouts_for_wandb = []
        self.completion_lengths = []

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        return BaseEnvConfig(
            group_size=2,
            use_wandb=False,
            total_steps=3,
            batch_size=4,
            max_token_length=512,
            steps_per_eval=0,
            ensure_scores_are_not_same=False,
        ), [APIServerConfig(model_name="tiny", base_url="http://localhost:9001/v1", api_key="x")]

    @classmethod
    def cli(cls):
        note("cli")
        super().cli()

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        question = QUESTIONS[self.iter % len(QUESTIONS)]
        self.iter += 1
        return question

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        question, answer = item
        chat = [{"role": "user", "content": question}]
        out = await self.server.chat_completion(messages=chat, n=self.config.group_size)
        scores = ScoredDataGroup()
        scores["tokens"], scores["masks"], scores["scores"] = [], [], []
        for choice in out.choices:
            reply = {"role": "assistant", "content": choice.message.content or ""}
            tok = tokenize_for_trainer(self.tokenizer, chat + [reply])
            correct = answer in reply["content"]
            scores["tokens"].append(tok["tokens"])
            scores["masks"].append(tok["masks"])
            scores["scores"].append(1.0 if correct else -1.0)
            self.percent_correct_buffer.append(1.0 if correct else 0.0)
            self.completion_lengths.append(len(tok["tokens"]))
        return scores, []

    async def add_rollouts_for_wandb(self, scored_data, item=None):
        await super().add_rollouts_for_wandb(scored_data, item)
        note("add_rollouts_for_wandb", kept=len(self.rollouts_for_wandb))

    async def create_rollout_table(self, wandb_metrics):
        wandb_metrics["train/rollout_groups"] = len(self.rollouts_for_wandb)
        note("create_rollout_table", groups=len(self.rollouts_for_wandb))
        return await super().create_rollout_table(wandb_metrics)

    async def wandb_log(self, wandb_metrics: Optional[dict] = None):
        if wandb_metrics is None:
            wandb_metrics = {}
        if self.percent_correct_buffer:
            wandb_metrics["train/percent_correct"] = sum(self.percent_correct_buffer) / len(
                self.percent_correct_buffer
            )
        self.percent_correct_buffer = list()
        note(
            "wandb_log",
            step=self.curr_step,
            prepend=self.wandb_prepend,
            lengths=len(self.completion_lengths),
            keys=sorted(wandb_metrics),
        )
        await super().wandb_log(wandb_metrics)

    def save_checkpoint(self, step, data=None):
        if data is None:
            data = {}
        data["iter"] = self.iter
        note("save_checkpoint", step=step)
        super().save_checkpoint(step, data)

    def load_checkpoint(self):
        super().load_checkpoint()
        note("load_checkpoint", iter=getattr(self, "iter", None))

    async def evaluate(self, *args, **kwargs):
        start = time.time()
        samples, correct = [], []
        for question, answer in QUESTIONS:
            out = await self.server.chat_completion(
                messages=[{"role": "user", "content": question}], n=1, split="eval"
            )
            reply = out.choices[0].message.content or ""
            correct.append(answer in reply)
            samples.append({"question": question, "response": reply, "correct": correct[-1]})
        percent_correct = sum(correct) / len(correct)
        self.eval_metrics.append(("eval/percent_correct", percent_correct))
        note("evaluate", max_token_len=self.max_token_len)
        await self.evaluate_log(
            metrics={"eval/percent_correct": percent_correct},
            samples=samples,
            start_time=start,
            end_time=time.time(),
        )


if __name__ == "__main__":
    AtroposNamesEnv.cli()

"""An Atropos-style SFT loader env that overrides the loop hooks (as Atropos's sft_loader does).

``add_train_workers`` starts no rollouts; ``env_step_checks`` sends pre-made groups itself each
time the trainer's step changes, then defers to the base; ``get_server_info`` reads ``/info`` with
aiohttp and ``parse_http_response`` but keeps the env's own ``max_token_len``.
"""

import logging

import aiohttp

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.io import parse_http_response
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

logger = logging.getLogger(__name__)


class SFTHooksEnv(BaseEnv):
    name = "sft_hooks_compat"

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

    async def setup(self):
        self.idx = 0
        self.max_token_len = 777
        self.info_seen = None
        self.sends = 0

    async def get_next_item(self) -> Item:
        self.idx += 1
        return {"prompt": f"Say {self.idx}", "reply": f"{self.idx}"}

    async def add_train_workers(self):
        pass  # no rollouts: this env only sends prepared groups

    async def get_server_info(self):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{self.config.rollout_server_url}/info") as resp:
                data = await parse_http_response(resp, logger)
        self.info_seen = data
        if data["batch_size"] != -1:
            self.config.batch_size = data["batch_size"]
        logger.warning("kept max_token_len %s (server said %s)", self.max_token_len, data)

    async def format_item(self, item) -> ScoredDataGroup:
        group = ScoredDataGroup()
        group["tokens"], group["masks"], group["scores"], group["messages"] = [], [], [], []
        for _ in range(self.config.group_size):
            chat = [
                {"role": "user", "content": item["prompt"]},
                {"role": "assistant", "content": item["reply"]},
            ]
            tok = tokenize_for_trainer(self.tokenizer, chat)
            group["tokens"].append(tok["tokens"])
            group["masks"].append(tok["masks"])
            group["scores"].append(1.0)
            group["messages"].append(chat)
        return group

    async def env_step_checks(self):
        if self.curr_step != self.status_dict["current_step"] or self.sends == 0:
            room = 2 * self.config.batch_size // self.config.group_size
            to_send = room - self.status_dict["queue_size"]
            for _ in range(max(0, to_send)):
                await self.handle_send_to_api(await self.format_item(await self.get_next_item()))
                self.sends += 1
        await super().env_step_checks()


if __name__ == "__main__":
    SFTHooksEnv.cli()

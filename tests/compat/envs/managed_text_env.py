"""An Atropos-style env using ``managed_server`` against a text-only (``openai``) endpoint.

With ``ATROPOS_ALLOW_DUMMY_MANAGED_SERVER=1`` the managed server tokenizes the text locally (as
Atropos's DummyManagedServer does), so the env gets tokens and masks from a server that returns
none. ``ManagedServerAdapter`` is used the way verifiers-style env files use it (an AsyncOpenAI
look-alike around the managed server).
"""

from typing import Optional

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.envs.server_handling.managed_server import ManagedServerAdapter
from atroposlib.type_definitions import Item


class ManagedTextEnv(BaseEnv):
    name = "managed_text_compat"

    @classmethod
    def config_init(cls) -> tuple[BaseEnvConfig, list[APIServerConfig]]:
        return BaseEnvConfig(
            group_size=2,
            use_wandb=False,
            total_steps=2,
            batch_size=4,
            max_token_length=512,
            steps_per_eval=0,
        ), [
            APIServerConfig(
                model_name="tiny",
                base_url="http://localhost:9001/v1",
                api_key="x",
                server_type="openai",
            )
        ]

    async def setup(self):
        self.n = 0

    async def get_next_item(self) -> Item:
        self.n += 1
        return {"question": f"What is {self.n}+1?", "answer": str(self.n + 1)}

    async def collect_trajectories(self, item) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        messages = [{"role": "user", "content": item["question"]}]
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            client = ManagedServerAdapter(managed_server=managed, base_url="http://unused/v1")
            completion = await client.chat.completions.create(
                messages=messages, n=self.config.group_size, max_tokens=16
            )
            nodes = managed.get_state()["nodes"]
        scored = ScoredDataGroup()
        scored["tokens"], scored["masks"], scored["scores"], scored["messages"] = [], [], [], []
        for choice, node in zip(completion.choices, nodes, strict=True):
            text = choice.message.content or ""
            scored["tokens"].append(node.tokens)
            scored["masks"].append(node.masked_tokens)
            scored["scores"].append(1.0 if item["answer"] in text else 0.0)
            scored["messages"].append(messages + [{"role": "assistant", "content": text}])
        return scored, []


if __name__ == "__main__":
    ManagedTextEnv.cli()

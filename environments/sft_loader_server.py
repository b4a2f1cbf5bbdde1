"""SFT warm-up: push an existing dataset through the pipeline as scored groups (Atropos's ``sft_loader_server``).

No inference happens: each group holds ``group_size`` examples from the dataset, every one scored 1.0
with a per-token advantage of 1.0 on the trained tokens (so a policy-gradient trainer performs plain
likelihood training) and ``group_overrides={"sft": True}`` / ``overrides=[{"sft": True}, ...]`` for
trainers that switch to an SFT loss. Only assistant tokens are trained on (``tokenize_for_trainer``
masks the rest), except for the plain ``text`` format, where every token is.

``--env.dataset`` is a local ``.jsonl``/``.json`` file (read through ``datasets.load_dataset("json")``)
or a hub dataset name. ``--env.dataset_format``:

* ``messages``: a column of OpenAI-style ``[{"role", "content"}, ...]`` conversations;
* ``sharegpt``: a column of ``[{"from": "human"|"gpt"|"system", "value"}, ...]``;
* ``prompt_completion``: ``prompt`` and ``completion`` columns (a user turn and an assistant turn);
* ``text``: one plain-text column, trained on entirely.

    python environments/sft_loader_server.py process --env.tokenizer_name MODEL_DIR \\
        --env.dataset my_chats.jsonl --env.total_steps 4
"""

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field

from atroposlib.envkit.data_sources import load_hub_rows
from atroposlib.envkit.servers import local_vllm_server
from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.errors import ConfigError
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
}


class SFTConfig(BaseEnvConfig):
    dataset: str = Field(
        default="", description="A local .jsonl/.json file, or a hub dataset name."
    )
    split: str = Field(
        default="train", description="Split to read (hub datasets; local files use train)."
    )
    dataset_format: Literal["messages", "sharegpt", "prompt_completion", "text"] = Field(
        default="messages", description="How rows are laid out (see the module docstring)."
    )
    column: str = Field(default="messages", description="Column holding the conversation or text.")
    train_on_all_assistant_turns: bool = Field(
        default=True, description="Train on every assistant turn."
    )


class SFTLoaderEnv(BaseEnv):
    name = "sft_loader"
    env_config_cls = SFTConfig

    @classmethod
    def config_init(cls) -> tuple[SFTConfig, list[APIServerConfig]]:
        env_config = SFTConfig(
            group_size=8,
            batch_size=16,
            wandb_name="sft",
            ensure_scores_are_not_same=False,  # every example scores 1.0
            inference_weight=-1,  # no inference
        )
        # No request is ever sent; a server entry is kept only because every env has one.
        return env_config, [local_vllm_server("none", health_check=False)]

    async def setup(self) -> None:
        cfg = self.config
        if not cfg.dataset:
            raise ConfigError(
                "sft_loader needs --env.dataset (a .jsonl/.json file or a hub dataset name)"
            )
        local = Path(cfg.dataset)
        if local.suffix in (".jsonl", ".json") and not local.is_file():
            raise ConfigError(f"--env.dataset: file not found: {cfg.dataset}")
        self.rows = (
            load_hub_rows("json", split="train", data_files=str(local))
            if local.is_file()
            else load_hub_rows(cfg.dataset, split=cfg.split)
        )
        if not self.rows:
            raise ConfigError(f"--env.dataset {cfg.dataset} has no rows")
        self.iter = 0

    async def get_next_item(self) -> Item:
        start = self.iter
        self.iter += self.config.group_size
        return [self.rows[i % len(self.rows)] for i in range(start, start + self.config.group_size)]

    def to_messages(self, row: dict) -> list[dict[str, str]]:
        fmt, col = self.config.dataset_format, self.config.column
        if fmt == "messages":
            return [{"role": m["role"], "content": m["content"]} for m in row[col]]
        if fmt == "sharegpt":
            return [{"role": _SHAREGPT_ROLES[m["from"]], "content": m["value"]} for m in row[col]]
        return [
            {"role": "user", "content": row["prompt"]},
            {"role": "assistant", "content": row["completion"]},
        ]

    def tokenize(self, row: dict) -> dict:
        if self.config.dataset_format == "text":
            tokens = list(self.tokenizer.encode(row[self.config.column], add_special_tokens=True))
            return {
                "tokens": tokens,
                "masks": list(tokens),
                "messages": [{"role": "text", "content": row[self.config.column]}],
            }
        messages = self.to_messages(row)
        out = tokenize_for_trainer(
            self.tokenizer,
            messages,
            include_messages=True,
            train_on_all_assistant_turns=self.config.train_on_all_assistant_turns,
        )
        return out

    async def collect_trajectories(
        self, item: Item
    ) -> tuple[Optional[ScoredDataGroup], list[Item]]:
        group = self.group_builder(group_overrides={"sft": True})
        for row in item:
            example = self.tokenize(row)
            advantages = [1.0 if m != -100 else 0.0 for m in example["masks"]]
            group.add(
                example["tokens"],
                example["masks"],
                1.0,
                messages=example["messages"],
                advantages=advantages,
                overrides={"sft": True},
            )
        return group.build(), []


if __name__ == "__main__":
    SFTLoaderEnv.cli()

"""The settings of a run: ``BaseEnvConfig`` (Atropos field names and defaults), ``EvalHandlingEnum``
and ``ServerConfigs`` (the inference servers an env is given).

Environments subclass ``BaseEnvConfig`` to add their own fields; every field carries a description so
that ``--help`` can list it. The layering of defaults, YAML and flags lives in ``config_loader``.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from atroposlib.inference_clients.config import APIServerConfig, ServerBaseline

ServerConfigs = Union[ServerBaseline, list[APIServerConfig]]
"""An env's inference servers: one config per server, or a ``ServerBaseline`` (defaults only)."""


class EvalHandlingEnum(str, Enum):
    """What training workers do while a scheduled evaluation runs."""

    STOP_TRAIN = "STOP_TRAIN"
    LIMIT_TRAIN = "LIMIT_TRAIN"
    NONE = "NONE"


class BaseEnvConfig(BaseModel):
    """Settings every environment shares (Atropos 0.4 names and defaults, plus a few of ours)."""

    model_config = ConfigDict(validate_assignment=True, use_enum_values=False)

    group_size: int = Field(
        default=4, ge=1, description="How many responses are grouped together for scoring."
    )
    max_num_workers: int = Field(
        default=-1,
        description="Maximum concurrent rollout workers; -1 means max_num_workers_per_node x number of servers.",
    )
    max_eval_workers: int = Field(
        default=16, ge=1, description="Maximum concurrent workers during evaluation."
    )
    max_num_workers_per_node: int = Field(
        default=8, ge=1, description="Workers per inference server when max_num_workers is -1."
    )
    steps_per_eval: int = Field(
        default=100, description="Run evaluate() every this many trainer steps (0 or less: never)."
    )
    max_token_length: int = Field(
        default=2048, ge=1, description="Maximum token length of a sequence (prompt + completion)."
    )
    eval_handling: EvalHandlingEnum = Field(
        default=EvalHandlingEnum.STOP_TRAIN,
        description="While an eval runs: STOP_TRAIN pauses rollouts, LIMIT_TRAIN scales them by "
        "eval_limit_ratio, NONE keeps going.",
    )
    eval_limit_ratio: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Fraction of training workers kept during evals (LIMIT_TRAIN).",
    )
    inference_weight: float = Field(
        default=1.0,
        description="Share of inference capacity for this env relative to others; -1 ignores it.",
    )
    batch_size: int = Field(
        default=-1,
        description="Training batch size in sequences; set by the trainer through the API (/info).",
    )
    max_batches_offpolicy: int = Field(
        default=3,
        description="Maximum number of batches queued ahead of the trainer (off-policy limit).",
    )
    tokenizer_name: str = Field(
        default="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
        description="Hugging Face tokenizer name or local directory.",
    )
    use_wandb: bool = Field(
        default=True,
        description="Log to Weights & Biases (falls back to offline/disabled without credentials).",
    )
    rollout_server_url: str = Field(
        default="http://localhost:8000", description="URL of the trajectory API (run-api)."
    )
    total_steps: int = Field(
        default=1000,
        description="Trainer steps to generate for (serve) or number of groups to make (process).",
    )
    wandb_name: Optional[str] = Field(
        default=None, description="Name of this env in the API and in wandb."
    )
    num_rollouts_to_keep: int = Field(
        default=32, ge=0, description="Number of rollouts to keep for logging."
    )
    num_rollouts_per_group_for_logging: int = Field(
        default=1, description="Rollouts per group kept for logging; -1 keeps all of them."
    )
    ensure_scores_are_not_same: bool = Field(
        default=True,
        description="Drop groups whose scores are all equal (they carry no learning signal).",
    )
    data_path_to_save_groups: Optional[str] = Field(
        default=None, description="If set, append every produced group to this JSONL file."
    )
    data_dir_to_save_evals: Optional[str] = Field(
        default=None, description="Directory for evaluation results (metrics.json, samples.jsonl)."
    )
    min_items_sent_before_logging: int = Field(
        default=2,
        description="Groups sent before the env logs its metrics; 0 or less logs every step.",
    )
    include_messages: bool = Field(
        default=False, description="Send each sequence's messages to the trainer along with tokens."
    )
    min_batch_allocation: Optional[float] = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum fraction (0-1) of every batch reserved for this env.",
    )
    worker_timeout: float = Field(
        default=600,
        description="Seconds before a rollout worker is cancelled and its item retried (serve and "
        "process); -1: never.",
    )
    thinking_mode: bool = Field(
        default=False,
        description="Ask for thinking: chat requests carry chat_template_kwargs.enable_thinking (vllm/sglang, "
        "managed_server templates); envs may also read it to change their prompts.",
    )
    reasoning_effort: Optional[Literal["low", "medium", "high"]] = Field(
        default=None,
        description="Sent as reasoning_effort with chat requests to server_type openai.",
    )
    max_reasoning_tokens: Optional[int] = Field(
        default=None,
        ge=1,
        description="Token budget for reasoning; read by envs (not sent to servers by the runtime).",
    )
    custom_thinking_prompt: Optional[str] = Field(
        default=None,
        description="Thinking system prompt used instead of the env's own when thinking is on "
        "(Atropos's field; envs that think always, like gsm8k, put it in place of their preamble).",
    )
    score_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds the scoring of one sample may take (self.score_samples); past it the "
        "sample's reward is unavailable (never 0), counted as scoring/unavailable_timeout.",
    )
    score_workers: int = Field(
        default=2,
        ge=1,
        description="Threads (or, with processes=True, worker processes) scoring samples at once "
        "(self.score_samples).",
    )
    on_token_drift: Literal["keep", "split", "drop"] = Field(
        default="keep",
        description="What a managed multi-turn episode does when re-rendering its conversation with "
        "the chat template would not give the tokens the model saw (a token drift, counted as "
        "managed/token_drifts): keep trains the exact tokens; split starts a new sequence from the "
        "re-rendered conversation (the old behaviour: earlier turns are masked in it); drop ends the "
        "episode (counted as managed/dropped_episodes).",
    )
    unreachable_timeout: float = Field(
        default=120.0,
        gt=0,
        description="Seconds a server that has never answered (the trajectory API at start-up, an "
        "inference server, also one that accepts connections and stays silent) may stay "
        "unreachable before the command ends with an error; outages of a server that did answer "
        "are retried without limit.",
    )
    progress_interval: float = Field(
        default=15.0,
        ge=0,
        description="Seconds between progress lines of serve (groups sent, dropped by reason, "
        "failures, queue, policy version) and evaluate (requests answered); 0: none.",
    )
    spool_dir: Optional[str] = Field(
        default=None,
        description="Directory of the on-disk spool for groups the API cannot take yet (serve); "
        "default: ./spool/<env name>.",
    )
    spool_max_groups: int = Field(
        default=1024,
        ge=1,
        description="Most unsent groups the spool holds; when full, finished groups wait and "
        "generation pauses until the API takes some (serve).",
    )
    spool_max_bytes: int = Field(
        default=1 << 30,
        ge=1,
        description="Most bytes of unsent groups the spool holds (default 1 GiB); as spool_max_groups.",
    )


__all__ = ["BaseEnvConfig", "EvalHandlingEnum", "ServerConfigs"]
